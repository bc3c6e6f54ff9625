"""What the Python binding adds over the C++ census, per call (run by hand after the build):

    PYTHONPATH=build/python python3 bench/python_overhead.py
"""
import timeit

import census
from census import _census

config = census.shipped_config("llama-3.1-8b")
handle = census.load_config(config)
calls = 3000
for label, call in [
    ("binding alone, config handle", lambda: _census.layer(handle, 0, 4096, 1)),
    ("census.census_layer, config handle", lambda: census.census_layer(handle, 0, 4096)),
    ("census.census_layer, config dict", lambda: census.census_layer(config, 0, 4096)),
]:
    seconds = min(timeit.repeat(call, number=calls, repeat=5)) / calls
    print(f"{label:40s} {seconds * 1e6:7.1f} us per call")

#!/usr/bin/env python3
"""A report as a real browser draws it: Debian's chromium, headless, takes a screenshot of the page
`census report` writes (it must not be blank: more than a few colours, a good share of pixels not
white) and dumps the page's DOM, which must hold the numbers the census prints.

Usage: report_browser_check.py CENSUS_BINARY [SCREENSHOT_OUT]
Exits 77 (ctest's "skipped") with a message when chromium is not installed.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIPPED = 77


def png_pixels(data):
    """(width, height, rows of RGB(A) bytes) of an 8-bit truecolour PNG, with the standard library only."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError(f"unexpected PNG format: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        for x in range(stride):
            left = row[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                row[x] = (row[x] + left) & 255
            elif kind == 2:
                row[x] = (row[x] + up) & 255
            elif kind == 3:
                row[x] = (row[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                row[x] = (row[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(row))
        previous = row
    return width, height, channels, rows


def chromium(binary, profile, *args):
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", "--window-size=1040,1500", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def main():
    census = sys.argv[1]
    keep = sys.argv[2] if len(sys.argv) > 2 else None
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("SKIPPED: chromium is not installed; scripts/bootstrap.sh installs it (apt-get install chromium)")
        return SKIPPED
    with tempfile.TemporaryDirectory(prefix="census-browser-") as tmp:
        page = os.path.join(tmp, "report.html")
        subprocess.run([census, "report", "llama-3.1-8b", "--output", page], check=True, capture_output=True)
        layer = json.loads(subprocess.run([census, "layer", "llama-3.1-8b", "--format", "json"], check=True,
                                          capture_output=True, text=True).stdout)
        url = "file://" + page

        shot = os.path.join(tmp, "shot.png")
        run = chromium(browser, os.path.join(tmp, "profile"), f"--screenshot={shot}", url)
        if not os.path.exists(shot):
            print("chromium wrote no screenshot:", run.stderr[-2000:])
            return 1
        with open(shot, "rb") as f:
            png = f.read()
        width, height, channels, rows = png_pixels(png)
        colours, coloured = set(), 0
        for row in rows[::2]:
            for x in range(0, width * channels, channels * 2):
                pixel = row[x:x + 3]
                colours.add(pixel)
                coloured += pixel != b"\xff\xff\xff"
        sampled = ((height + 1) // 2) * ((width + 1) // 2)
        print(f"screenshot {width}x{height}: {len(colours)} colours, {100 * coloured / sampled:.1f}% not white")
        if len(colours) <= 16 or coloured < sampled // 20:
            print("the screenshot is blank or nearly so")
            return 1
        if keep:
            shutil.copyfile(shot, keep)

        dom = chromium(browser, os.path.join(tmp, "profile"), "--dump-dom", url).stdout
        grouped = lambda n: f"{n:,}"
        expected = [grouped(layer["saved"]), grouped(layer["working"]), "Census report: llama-3.1-8b",
                    "id=\"timeline\"", "id=\"saved-by-op\"", "id=\"saved-by-module\"", "id=\"layer-kinds\"",
                    "id=\"sequence-length\"", f"data-working=\"{layer['working']}\"",
                    f"data-saved=\"{layer['saved']}\""]
        missing = [text for text in expected if text not in dom]
        if missing:
            print("the browser's DOM lacks:", missing)
            return 1
        print(f"DOM of {len(dom)} characters holds saved {grouped(layer['saved'])} and working "
              f"{grouped(layer['working'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

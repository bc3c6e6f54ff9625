#!/usr/bin/env python3
"""The browser page (web/, docs/web.md) as a real browser runs it: Debian's chromium, headless, driven
through the DevTools protocol over a pipe. The test fills the page's form as a user would (a shipped
config, a layout), presses Run, reads the numbers the page drew from its DOM, and checks each equals
what `census step --format json` prints natively on the same arguments: a dense model, a MoE model,
and a pipeline layout; the same for a plan. A bad pasted config must show the command line's one-line
refusal, with nothing drawn; no request may leave the page. The fit question's answers (the largest LoRA
micro-batch and the longest sequence on a 24 GiB card) must fit natively, and one more must not. The time of a `census step` of
Llama-3.1-70B with PP 8 in the page is printed, never asserted, as is the size of the WebAssembly.

Usage: web_browser_check.py --site BUILD/web/site --census BUILD/census
Exits 77 (ctest's "skipped") with a message when chromium is missing or the page was not built (no
emscripten).
"""
import argparse
import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIPPED = 77
WASM_LIMIT = 4 * 1024 * 1024


class Browser:
    """Headless chromium and one page, spoken to over --remote-debugging-pipe (NUL-ended JSON)."""

    def __init__(self, binary, profile):
        # The browser reads fd 3 and writes fd 4: its ends of the pipes are moved above 9 first, so
        # that setting 3 and 4 up never closes the other one.
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        to_browser_r, from_browser_w = (self.above_nine(to_browser_r), self.above_nine(from_browser_w))
        command = (f"exec '{binary}' --headless --no-sandbox --disable-gpu --remote-debugging-pipe "
                   f"--user-data-dir='{profile}' --window-size=1100,1400 about:blank "
                   f"3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-")
        self.process = subprocess.Popen(["bash", "-c", command], pass_fds=(to_browser_r, from_browser_w),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.session = None
        self.events = []

    @staticmethod
    def above_nine(fd):
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
        os.close(fd)
        return moved

    def send(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def receive(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, url):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.send("Network.enable")
        self.send("Page.enable")
        self.send("Log.enable")
        self.send("Runtime.enable")
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def wait_for(self, method):
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self.receive())

    def evaluate(self, expression):
        """The value of a JavaScript expression (awaited where it is a promise), or its exception."""
        result = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True, "timeout": 120000})
        if "exceptionDetails" in result:
            raise RuntimeError(f"the page threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def console_errors(self):
        errors = [e["params"]["entry"]["text"] for e in self.events
                  if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"]
        errors += [" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"])
                   for e in self.events if e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error"]
        errors += [e["params"]["exceptionDetails"]["text"] for e in self.events if e.get("method") == "Runtime.exceptionThrown"]
        return errors

    def requests(self):
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except (RuntimeError, OSError):
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


# Fill the form as a user does: the model, the question, each option; then press Run. The page's
# answer is drawn when the click returns (the module runs on the page's thread).
FILL = """
(async () => {
  await censusPage.ready;
  const choice = %s;
  document.querySelector(`input[name=source][value=${choice.source}]`).checked = true;
  if (choice.source === "shipped") document.querySelector("#shipped").value = choice.config;
  else document.querySelector("#pasted").value = choice.config;
  document.querySelector(`input[name=command][value=${choice.command}]`).checked = true;
  document.querySelector("#form").dispatchEvent(new Event("change"));
  for (const input of document.querySelectorAll(`[name^="${choice.command}:"]`))
    if (input.type === "checkbox") input.checked = false; else input.value = "";
  for (const [flag, value] of choice.options) {
    const input = document.querySelector(`[name="${choice.command}:${flag}"]`);
    if (!input) throw new Error("the page has no field " + flag);
    if (input.type === "checkbox") input.checked = true; else input.value = value;
  }
  document.querySelector("#run").click();
  return true;
})()
"""

# The numbers as the page shows them: each table's cells by column, and each chart's drawn totals.
READ = """
(() => {
  const tables = {};
  for (const t of document.querySelectorAll("#result table")) {
    const rows = [...t.rows].slice(1).map((r) => Object.fromEntries([...r.cells].map((c) => [c.dataset.key, c.textContent])));
    tables[t.id] = rows;
  }
  const charts = {};
  for (const svg of document.querySelectorAll("#result svg.chart"))
    charts[svg.id] = [...svg.querySelectorAll("[data-total]")].map((g) => [g.dataset.group, g.dataset.total]);
  const status = document.querySelector("#status");
  return {tables, charts, svgs: document.querySelectorAll("#result svg").length,
          refusal: document.querySelector("#refusal").hidden ? null : document.querySelector("#refusal").textContent,
          code: Number(status.dataset.code), ms: Number(status.dataset.ms),
          frame: document.querySelector("#report-frame") ? document.querySelector("#report-frame").srcdoc : ""};
})()
"""

# The fit question's answer: the value found, its total and the memory (the status's data), and the steps searched.
READ_FIT = """
(() => {
  const status = document.querySelector("#status");
  const table = document.querySelector("#fit-probes");
  return {best: status.dataset.best ?? null, total: status.dataset.total ?? null, memory: status.dataset.memory ?? null,
          status: status.textContent, probes: table ? [...table.rows].slice(1).map((r) => r.cells[0].textContent) : []};
})()
"""


def number(text):
    return int(text.replace(",", ""))


def native(census, argv, cwd=None):
    done = subprocess.run([census, *argv], capture_output=True, text=True, cwd=cwd, check=False)
    return done.returncode, done.stdout, done.stderr


def step_mismatches(page, expected):
    """Where the page's step tables and charts differ from `census step --format json`."""
    wrong = []
    stages = expected.get("stages", [expected])
    worst = next(s for s in stages if s["stage"]["index"] == expected.get("worst_stage", stages[0]["stage"]["index"]))
    rows = page["tables"].get("step-stages", [])
    if len(rows) != len(stages):
        return [f"{len(rows)} stage rows drawn, {len(stages)} stages printed"]
    for row, stage in zip(rows, stages):
        peak = stage["composed"]["peak"] if "composed" in stage else stage["peak"]
        want = {"stage": stage["stage"]["index"], "peak": peak["bytes"], "phase": peak["phase"],
                "parameters": peak["split"]["parameters"], "gradients": peak["split"]["gradients"],
                "optimizer_states": peak["split"]["optimizer_states"], "other": peak["split"]["other"],
                "total": stage["total_bytes"]}
        for key, value in want.items():
            got = row[key] if isinstance(value, str) else number(row[key])
            if got != value:
                wrong.append(f"stage {want['stage']} {key}: page {row[key]}, census {value}")
    for row, phase in zip(page["tables"].get("step-phases", []), worst["phases"]):
        for key, json_key in (("live_at_start", "live_at_start"), ("peak", "peak_bytes"), ("live_at_end", "live_at_end")):
            if number(row[key]) != phase[json_key]:
                wrong.append(f"phase {phase['name']} {key}: page {row[key]}, census {phase[json_key]}")
        if row["phase"] != phase["name"] or row["peak_op"] != (phase["peak_op"] or ""):
            wrong.append(f"phase {phase['name']}: page {row['phase']} {row['peak_op']}")
    if len(page["tables"].get("step-phases", [])) != len(worst["phases"]):
        wrong.append("the phases drawn are not the worst stage's phases")
    worst_rows = {r[""]: r for r in page["tables"].get("step-worst", [])}
    host = worst.get("host")
    if host and host["saves"] is not None and number(worst_rows.get("host (pinned)", {"bytes": "-1"})["bytes"]) != \
            host["pinned_peak_bytes"]:
        wrong.append(f"the host line differs from {host['pinned_peak_bytes']}")
    if host and host["saves"] is None and number(worst_rows.get("host", {"bytes": "-1"})["bytes"]) != host["peak_bytes"]:
        wrong.append(f"the host line differs from {host['peak_bytes']}")
    if number(worst_rows.get("total", {"bytes": "-1"})["bytes"]) != worst["total_bytes"]:
        wrong.append(f"the worst stage's total differs from {worst['total_bytes']}")
    drawn = [int(float(total)) for _, total in page["charts"].get("step-stages", [])]
    if drawn != [s["total_bytes"] for s in stages]:
        wrong.append(f"the stages chart draws {drawn}, census prints {[s['total_bytes'] for s in stages]}")
    return wrong


def plan_mismatches(page, expected):
    wrong = []
    rows = page["tables"].get("plan-layouts", [])
    if len(rows) != len(expected["layouts"]):
        return [f"{len(rows)} layouts drawn, {len(expected['layouts'])} printed"]
    for i, (row, layout) in enumerate(zip(rows, expected["layouts"])):
        for key, json_key in (("TP", "tp"), ("CP", "cp"), ("EP", "ep"), ("PP", "pp"), ("DP", "dp"), ("M", "micro_batches"),
                              ("ZeRO", "zero"), ("peak", "peak_bytes"), ("headroom", "headroom_bytes"),
                              ("stage", "worst_stage")):
            if number(row[key]) != layout[json_key]:
                wrong.append(f"layout {i + 1} {key}: page {row[key]}, census {layout[json_key]}")
        if row["recompute"] != layout["recompute"]:
            wrong.append(f"layout {i + 1} recompute: page {row['recompute']}, census {layout['recompute']}")
    return wrong


def wasm_bytes(site):
    """The size of the WebAssembly census.js carries inline (a base64 data URI)."""
    with open(os.path.join(site, "census.js")) as f:
        found = re.search(r"data:application/octet-stream;base64,([A-Za-z0-9+/=]+)", f.read())
    return len(base64.b64decode(found.group(1))) if found else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--site", required=True)
    parser.add_argument("--census", required=True)
    parser.add_argument("--screenshot", help="also write a screenshot of a step's answer to this PNG file")
    args = parser.parse_args()
    args.census = os.path.abspath(args.census)
    browser_binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_binary is None:
        print("SKIPPED: chromium is not installed; scripts/bootstrap.sh --all installs it (apt-get install chromium)")
        return SKIPPED
    if not os.path.exists(os.path.join(args.site, "census.js")):
        print(f"SKIPPED: the page is not built ({args.site}/census.js is missing): emscripten is not installed; "
              "scripts/bootstrap.sh --all installs it and builds the page")
        return SKIPPED
    failures = []
    size = wasm_bytes(args.site)
    print(f"WebAssembly: {size:,} bytes inline in census.js" if size else "census.js carries no inline WebAssembly")
    if size is None or size >= WASM_LIMIT:
        failures.append(f"the WebAssembly must be under {WASM_LIMIT:,} bytes")

    steps = [
        ("dense", "llama-3.1-8b", [("--tp", "2"), ("--seq-length", "4096"), ("--micro-batches", "2"),
                                   ("--recompute", "selective"), ("--dp", "4"), ("--zero", "1")]),
        ("MoE", "qwen3-30b-a3b", [("--ep", "4"), ("--seq-length", "2048"), ("--micro-batches", "2")]),
        ("pipeline", "llama-3.1-70b", [("--tp", "8"), ("--pp", "4"), ("--micro-batches", "8"),
                                       ("--schedule", "interleaved"), ("--virtual-stages", "2")]),
        ("timed", "llama-3.1-70b", [("--tp", "8"), ("--pp", "8"), ("--micro-batches", "16")]),
        ("first step", "qwen3-8b", [("--seq-length", "2048"), ("--first-step", None), ("--optimizer-impl", "fused")]),
        ("TRL's loss", "gemma-2-9b", [("--seq-length", "2048"), ("--recompute", "full"), ("--loss", "trl-chunked-nll")]),
        ("offloaded", "qwen3-8b", [("--seq-length", "2048"), ("--recompute", "full"), ("--offload-activations", "trl")]),
        ("Liger", "llama-3.1-8b", [("--seq-length", "4096"), ("--liger", None)]),
        ("FP8", "llama-3.1-8b", [("--seq-length", "4096"), ("--fp8", "rowwise")]),
        ("CPU offloading", "llama-3.1-8b", [("--seq-length", "4096"), ("--fsdp", None), ("--dp", "8"),
                                            ("--master-weights", "fp32"), ("--cpu-offload", None)]),
    ]
    with tempfile.TemporaryDirectory(prefix="census-web-") as tmp:
        browser = Browser(browser_binary, os.path.join(tmp, "profile"))
        try:
            browser.open("file://" + os.path.abspath(os.path.join(args.site, "index.html")))
            browser.evaluate("censusPage.ready.then(() => true)")
            for name, config, options in steps:
                choice = {"source": "shipped", "config": config, "command": "step", "options": options}
                browser.evaluate(FILL % json.dumps(choice))
                page = browser.evaluate(READ)
                argv = ["step", config, *[x for o in options for x in o if x is not None], "--format", "json"]
                code, out, err = native(args.census, argv)
                if code != 0 or page["code"] != 0:
                    failures.append(f"{name}: census exit {code} ({err.strip()}), page exit {page['code']} ({page['refusal']})")
                    continue
                wrong = step_mismatches(page, json.loads(out))
                failures += [f"{name} ({config}): {w}" for w in wrong]
                stages = len(page["tables"].get("step-stages", []))
                print(f"step {name}: census {' '.join(argv[1:-2])}: {stages} stage(s), "
                      f"{sum(len(r) for r in page['tables'].values())} table rows read, "
                      f"{'equal to' if not wrong else 'DIFFERENT from'} census step --format json; "
                      f"{page['ms']:.1f} ms in the page")
                if name == "timed":  # once more, the module now compiled in full by the browser
                    browser.evaluate(FILL % json.dumps(choice))
                    print(f"step {name}, again: {browser.evaluate(READ)['ms']:.1f} ms in the page")

            # A plan, and one that searches the loss and the optimizer beside the layouts (two columns more).
            for plan_options in ([("--gpus", "16"), ("--device", "h100"), ("--seq-length", "8192")],
                                 [("--gpus", "2"), ("--device", "h100"), ("--gpu-memory", "40GiB"), ("--seq-length", "8192"),
                                  ("--search", "loss,optimizer")]):
                browser.evaluate(FILL % json.dumps({"source": "shipped", "config": "llama-3.1-8b", "command": "plan",
                                                    "options": plan_options}))
                page = browser.evaluate(READ)
                code, out, err = native(args.census, ["plan", "llama-3.1-8b", *[x for o in plan_options for x in o],
                                                      "--format", "json"])
                wrong = plan_mismatches(page, json.loads(out)) if code == 0 else [f"census refused: {err}"]
                if code == 0 and json.loads(out)["search"]["losses"]:
                    for i, (row, layout) in enumerate(zip(page["tables"].get("plan-layouts", []), json.loads(out)["layouts"])):
                        for key in ("optimizer", "loss"):
                            if row.get(key) != layout[key]:
                                wrong.append(f"layout {i + 1} {key}: page {row.get(key)}, census {layout[key]}")
                failures += [f"plan: {w}" for w in wrong]
                if not page["charts"].get("plan-memory"):
                    failures.append("plan: the page drew no plan-memory chart")
                print(f"plan: {len(page['tables'].get('plan-layouts', []))} layouts, "
                      f"{'equal to' if not wrong else 'DIFFERENT from'} census plan --format json; {page['ms']:.1f} ms in the page")

            # The fine-tuner's question: the largest micro-batch, and the longest sequence, that fit on a 24 GiB
            # card, with LoRA; and the largest micro-batch with QLoRA (the page's training choice adds the recipe's
            # 4-bit base). The answer must fit natively, and one more (a sequence or 256 tokens) must not, or be
            # refused.
            qlora = ["--lora", "--quantize", "nf4", "--double-quant", "--compute-dtype", "bf16"]
            for key, fixed, tuning in (("--micro-batch-size", ("--seq-length", "2048"), "lora"),
                                       ("--seq-length", ("--micro-batch-size", "1"), "lora"),
                                       ("--micro-batch-size", ("--seq-length", "2048"), "qlora")):
                fit_options = [("--lora-targets", "all-linear"), ("--recompute", "full"), fixed,
                               ("tuning", tuning), ("gpu", "24GiB"), ("search", key)]
                browser.evaluate(FILL % json.dumps({"source": "shipped", "config": "qwen3-8b", "command": "fit",
                                                    "options": fit_options}))
                page = browser.evaluate(READ_FIT)
                memory = 24 * 2 ** 30
                base = ["step", "qwen3-8b", "--lora-targets", "all-linear", "--recompute", "full", *fixed,
                        *(qlora if tuning == "qlora" else ["--lora"])]
                if page["best"] is None:
                    failures.append(f"fit {key}: the page found nothing that fits ({page['status']})")
                    continue
                best = int(page["best"])
                step = 256 if key == "--seq-length" else 1
                code, out, err = native(args.census, [*base, key, str(best), "--format", "json"])
                total = json.loads(out)["total_bytes"] if code == 0 else None
                code_over, out_over, _ = native(args.census, [*base, key, str(best + step), "--format", "json"])
                over = json.loads(out_over)["total_bytes"] if code_over == 0 else None
                if total is None or total > memory or total != int(page["total"]):
                    failures.append(f"fit {key} {best}: census total {total}, page {page['total']}, memory {memory}")
                if over is not None and over <= memory:
                    failures.append(f"fit {key}: {best + step} fits too ({over} B), the page stopped at {best}")
                if len(page["probes"]) < 2:
                    failures.append(f"fit {key}: the page shows {len(page['probes'])} steps searched")
                print(f"fit {tuning} {key}: {best} on 24 GiB (census: {total:,} B; {best + step}: "
                      f"{'refused' if over is None else f'{over:,} B'}), {len(page['probes'])} steps searched in the page")

            # A config the command line refuses: its one line, and nothing drawn.
            bad = '{"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 0}'
            browser.evaluate(FILL % json.dumps({"source": "pasted", "config": bad, "command": "step", "options": []}))
            page = browser.evaluate(READ)
            with open(os.path.join(tmp, "config.json"), "w") as f:
                f.write(bad)
            code, out, err = native(args.census, ["step", "config.json", "--format", "json"], cwd=tmp)
            if code != 2 or page["refusal"] != err.strip() or page["code"] != 2:
                failures.append(f"bad config: page shows {page['refusal']!r} (exit {page['code']}), "
                                f"census prints {err.strip()!r} (exit {code})")
            if page["tables"] or page["svgs"]:
                failures.append("bad config: the page drew tables or charts beside the refusal")
            print(f"bad config: the page shows the command line's refusal: {page['refusal']}")

            browser.evaluate(FILL % json.dumps({"source": "shipped", "config": "llama-3.1-8b", "command": "report",
                                                "options": [("--seq-length", "4096")]}))
            page = browser.evaluate(READ)
            native_page = os.path.join(tmp, "report.html")
            native(args.census, ["report", "llama-3.1-8b", "--seq-length", "4096", "--output", native_page])
            with open(native_page) as f:
                same = page["frame"] == f.read()
            if page["code"] != 0 or not same:
                failures.append(f"report: exit {page['code']}; the page's report is not census report's page")
            print(f"report: census report's page, {len(page['frame']):,} characters, "
                  f"{'the same as' if same else 'DIFFERENT from'} the command line's, in {page['ms']:.1f} ms")
            if args.screenshot:
                browser.evaluate(FILL % json.dumps({"source": "shipped", "config": "llama-3.1-70b", "command": "step",
                                                    "options": steps[2][2]}))
                browser.evaluate("document.querySelector('#gpu-memory').value = '80GiB', "
                                 "document.querySelector('#run').click(), true")
                shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
                with open(args.screenshot, "wb") as f:
                    f.write(base64.b64decode(shot["data"]))

            errors = browser.console_errors()
            if errors:
                failures.append(f"the page logged errors: {errors[:5]}")
            outside = [u for u in browser.requests() if not u.startswith(("file:", "data:", "about:", "blob:"))]
            if outside:
                failures.append(f"the page sent requests: {outside[:5]}")
        finally:
            browser.close()

    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

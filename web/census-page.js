// The page's form, the argv it builds, and the answer drawn (docs/web.md).
//
// The page computes nothing. Every number it shows is what the census module (census.js, the
// command line compiled to WebAssembly) printed: the page builds `census <command> CONFIG --option
// value ...` from its form, runs the command line's own dispatch on it, renders the JSON the command
// prints (`--format json`) as tables, and has the module draw that JSON with the charts of `census
// report` (src/report/). The form itself is the command's `--help`: each option the command line
// lists is a field, so an option added to the command line is a field here with no change to the page.
// The one question no command answers alone, what fits, is a search over `census step`: the page only
// compares each step's printed total with the GPU's memory (fitSearch).
"use strict";

(function () {
  // Options the page sets itself, or that name files the page does not have.
  const NOT_FIELDS = new Set(["--help", "--format", "--output", "--svg", "--layers", "--train-yaml"]);
  // The options shown first, in this order, where the command has them; the rest are under "more".
  const FIRST = {
    step: ["--seq-length", "--micro-batch-size", "--micro-batches", "--tp", "--cp", "--ep", "--pp", "--dp",
           "--schedule", "--virtual-stages", "--recompute", "--zero", "--fsdp", "--optimizer", "--optimizer-impl",
           "--first-step", "--loss", "--liger", "--offload-activations", "--cpu-offload", "--fp8", "--fp8-skip-head"],
    plan: ["--gpus", "--device", "--gpu-memory", "--seq-length", "--micro-batch-size", "--global-batch",
           "--gpus-per-node", "--top", "--optimizer", "--loss", "--liger", "--search"],
    report: ["--layer-index", "--seq-length", "--tp", "--selective"],
    // The fine-tuner's question: census step's options, searched over one of them (fitSearch).
    fit: ["--lora", "--lora-rank", "--lora-alpha", "--lora-targets", "--lora-dtype", "--use-dora", "--modules-to-save",
          "--quantize", "--double-quant", "--compute-dtype", "--prepare-kbit", "--autocast", "--load-dtype", "--seq-length",
          "--micro-batch-size", "--recompute", "--optimizer", "--loss", "--liger", "--offload-activations", "--first-step"],
  };
  // The command each question's form is the --help of, and runs.
  const COMMAND = {step: "step", plan: "plan", report: "report", fit: "step"};
  // The GPUs the fit question offers: their memory as census takes a size, and its bytes (GiB: 2^30 B, GB: 10^9 B).
  const GiB = 2 ** 30;
  const GPUS = [
    ["24 GiB: RTX 3090, RTX 4090, A10, L4", "24GiB", 24 * GiB],
    ["32 GiB: RTX 5090", "32GiB", 32 * GiB],
    ["40 GiB: A100 40GB", "40GiB", 40 * GiB],
    ["48 GiB: L40S, RTX 6000 Ada, A40", "48GiB", 48 * GiB],
    ["80 GiB: A100 80GB, H100", "80GiB", 80 * GiB],
    ["96 GiB: RTX PRO 6000", "96GiB", 96 * GiB],
    ["141 GB: H200", "141GB", 141e9],
    ["180 GB: B200", "180GB", 180e9],
  ];
  // The largest value a fit search tries, by the option it grows.
  const SEARCH_LIMIT = {"--micro-batch-size": 4096, "--seq-length": 1 << 20};
  const PASTED_PATH = "config.json";  // where a pasted config is written, as the command line names it

  const $ = (selector) => document.querySelector(selector);
  let census = null;
  const fields = {};  // command -> [{flag, kind, element}]

  // ---- the module ----------------------------------------------------------------------------
  // A string in, a string out: the module's answer is valid until its next call, so it is read at once.
  function callModule(name, ...strings) {
    const pointers = strings.map((s) => {
      const size = census.lengthBytesUTF8(s) + 1;
      const pointer = census._malloc(size);
      census.stringToUTF8(s, pointer, size);
      return pointer;
    });
    try {
      return census.UTF8ToString(census["_" + name](...pointers));
    } finally {
      pointers.forEach((p) => census._free(p));
    }
  }

  // Integers past 2^53 kept exact, as BigInt, where the browser hands a reviver the number's text.
  function parseJson(text) {
    return JSON.parse(text, (key, value, context) =>
      typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value) && context && context.source
        ? BigInt(context.source) : value);
  }

  // Run `census ...argv`: {stdout, stderr, code, ms}.
  function run(argv) {
    const start = performance.now();
    const result = JSON.parse(callModule("census_run", JSON.stringify(argv)));
    result.ms = performance.now() - start;
    return result;
  }

  function draw(kind, json, gpuMemory) {
    return JSON.parse(callModule("census_draw", kind, json, gpuMemory || ""));
  }

  // ---- the form, from the command's --help -----------------------------------------------------
  // CLI11 lists an option as "  --name TYPE[:{a,b}][ REQUIRED]  description", the description on the
  // next lines when the name is long; a flag has no TYPE.
  function parseHelp(text) {
    const options = [];
    let inOptions = false;
    for (const line of text.split("\n")) {
      if (/^Options:/.test(line)) { inOptions = true; continue; }
      if (!inOptions) continue;
      const m = /^  (?:-\w,)?(--[\w-]+)(?: ([A-Z]+)(?::\{([^}]*)\}|:\S+)?)?( REQUIRED)?(?:\s+(.*))?$/.exec(line);
      if (m) {
        options.push({flag: m[1], type: m[2] || "FLAG", choices: m[3] ? m[3].split(",") : null,
                      required: Boolean(m[4]), help: (m[5] || "").trim()});
      } else if (/^\s{8,}\S/.test(line) && options.length) {
        const last = options[options.length - 1];
        last.help = (last.help ? last.help + " " : "") + line.trim();
      } else if (/^\S/.test(line)) {
        inOptions = false;
      }
    }
    return options;
  }

  function makeField(command, option) {
    const label = document.createElement("label");
    label.title = option.help;
    label.dataset.flag = option.flag;
    const name = document.createElement("span");
    name.className = "flag";
    name.textContent = option.flag + (option.required ? " *" : "");
    let input;
    if (option.type === "FLAG") {
      input = document.createElement("input");
      input.type = "checkbox";
    } else if (option.choices) {
      input = document.createElement("select");
      input.append(new Option("(default)", ""));
      option.choices.forEach((c) => input.append(new Option(c, c)));
    } else {
      input = document.createElement("input");
      input.type = option.type === "INT" || option.type === "FLOAT" ? "number" : "text";
      if (option.type === "FLOAT") input.step = "any";
    }
    input.name = command + ":" + option.flag;
    const hint = document.createElement("span");
    hint.className = "hint";
    hint.textContent = option.help;
    label.append(name, input, hint);
    fields[command].push({flag: option.flag, kind: option.type, element: input});
    return label;
  }

  function buildForms() {
    for (const command of Object.keys(FIRST)) {
      fields[command] = [];
      const help = run([COMMAND[command], "--help"]);
      const options = parseHelp(help.stdout).filter((o) => !NOT_FIELDS.has(o.flag));
      const first = FIRST[command].map((flag) => options.find((o) => o.flag === flag)).filter(Boolean);
      const rest = options.filter((o) => !first.includes(o));
      const main = document.createElement("div"), more = document.createElement("div");
      main.className = more.className = "grid command-options";
      main.dataset.command = more.dataset.command = command;
      first.forEach((o) => main.append(makeField(command, o)));
      rest.forEach((o) => more.append(makeField(command, o)));
      $("#main-options").append(main);
      $("#more-options").append(more);
    }
  }

  function command() { return document.querySelector("input[name=command]:checked").value; }

  function showCommand() {
    document.querySelectorAll(".command-options").forEach((d) => { d.hidden = d.dataset.command !== command(); });
    $("#page-options").hidden = command() !== "step";
    $("#fit-options").hidden = command() !== "fit";
    $("#command-line").textContent = "$ " + shellLine(argv(false));
  }

  // The argv of the form: the command, the config, then each field given (blank: not given).
  function argv(json) {
    const pasted = document.querySelector("input[name=source]:checked").value === "pasted";
    const args = [COMMAND[command()], pasted ? PASTED_PATH : $("#shipped").value];
    for (const f of fields[command()]) {
      if (f.kind === "FLAG") { if (f.element.checked) args.push(f.flag); continue; }
      const value = f.element.value.trim();
      if (value !== "") args.push(f.flag, value);
    }
    if (command() === "fit") tune(args, $("#fit-tuning").value);
    if (json && command() !== "report") args.push("--format", "json");
    return args;
  }

  // The fit question's way of training, where the form's own options do not already say it: LoRA adds
  // PEFT's adapters (--lora); QLoRA the usual recipe's 4-bit base beside them (nf4, double quantization,
  // bf16 compute). Full fine-tuning adds nothing.
  function tune(args, tuning) {
    if (tuning !== "lora" && tuning !== "qlora") return;
    const has = (flag) => args.some((a) => a === flag || a.startsWith(flag + "-"));
    if (!has("--lora") && !args.includes("--use-dora")) args.push("--lora");
    if (tuning !== "qlora") return;
    if (!args.includes("--quantize")) args.push("--quantize", "nf4");
    if (!args.includes("--double-quant")) args.push("--double-quant");
    if (!args.includes("--compute-dtype")) args.push("--compute-dtype", "bf16");
  }

  function shellLine(args) {
    return ["census", ...args].map((a) => (/^[\w.,:=@%+\/-]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'")).join(" ");
  }

  // ---- the answer ----------------------------------------------------------------------------
  const grouped = (n) => (typeof n === "bigint" ? n : Number(n)).toLocaleString("en-US");
  function binary(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let v = Number(n), u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u += 1; }
    return u === 0 ? v + " B" : v.toFixed(2) + " " + units[u];
  }
  const seconds = (s) => (s >= 1 ? s.toFixed(2) + " s" : (s * 1e3).toFixed(1) + " ms");

  // A table of rows; a cell is text, or {bytes}, {number}, {seconds} drawn with its exact value in data-value.
  function table(id, header, rows) {
    const t = document.createElement("table");
    t.id = id;
    const head = t.insertRow();
    header.forEach((h) => { const th = document.createElement("th"); th.textContent = h; head.append(th); });
    for (const row of rows) {
      const tr = t.insertRow();
      row.forEach((cell, i) => {
        const td = tr.insertCell();
        td.dataset.key = header[i];
        if (cell !== null && typeof cell === "object") {
          const [kind, value] = Object.entries(cell)[0];
          td.className = "n";
          td.dataset.value = String(value);
          td.textContent = kind === "bytes" ? grouped(value) : kind === "seconds" ? seconds(value) : grouped(value);
          if (kind === "bytes") td.title = binary(value);
        } else {
          td.textContent = cell === null || cell === undefined ? "" : String(cell);
        }
      });
    }
    return t;
  }

  function section(title, ...children) {
    const s = document.createElement("section");
    const h = document.createElement("h2");
    h.textContent = title;
    s.append(h, ...children);
    return s;
  }

  function paragraph(text, className) {
    const p = document.createElement("p");
    p.textContent = text;
    if (className) p.className = className;
    return p;
  }

  function charts(kind, jsonText, gpuMemory) {
    const drawn = draw(kind, jsonText, gpuMemory);
    const box = document.createElement("div");
    box.className = "charts";
    if (drawn.error) {
      box.append(paragraph(drawn.error, "refusal"));
      return box;
    }
    // The module's own SVG, as census report embeds it.
    for (const chart of drawn.charts) {
      const figure = document.createElement("figure");
      figure.innerHTML = chart.svg;
      box.append(figure);
    }
    return box;
  }

  function split(s) {
    return [{bytes: s.parameters}, {bytes: s.gradients}, {bytes: s.optimizer_states}, {bytes: s.other}];
  }

  function renderStep(step, jsonText, gpuMemory = $("#gpu-memory").value.trim()) {
    const stages = step.stages || [step];
    const peakOf = (s) => (s.composed ? s.composed.peak : s.peak);
    const worst = step.stages ? stages.find((s) => s.stage.index === step.worst_stage) : step;
    const out = [];
    const optimizer = worst.optimizer ? worst.optimizer.name : null;
    out.push(paragraph(!optimizer ? "No optimizer step."
      : worst.step === "first"
      ? "The first step: " + optimizer + " makes its states inside its optimizer step."
      : "The steady state, every step from the second on: " + optimizer + "'s states, made by the first, alive from the start.",
      "note"));
    if (worst.liger)
      out.push(paragraph("Liger's kernels, as its patch applies them: its RMSNorm (the input and an fp32 rstd a row saved; the gradient written over the incoming one), its SwiGLU (the gate and up projections saved, their gradients written into them) and its rotary (q and k rotated in place).", "note"));
    if (worst.fp8)
      out.push(paragraph("FP8 training (" + worst.fp8.recipe + (worst.fp8.head === "bf16" ? ", the head in bf16" : "") + "), eager, as torchtitan converts the model with torchao: each Linear whose dimensions are multiples of 16 casts its operands to float8 for its three products, and saves its input and weight in bf16; the casts' fp32 temporaries are eager mode's (torch.compile fuses them away).", "note"));
    if (worst.loss === "trl-chunked-nll")
      out.push(paragraph("The loss: TRL's chunked loss, no logits; each chunk of 256 tokens checkpointed, with an fp32 copy of the head.", "note"));
    if (worst.loss === "liger-flce")
      out.push(paragraph("The loss: Liger's fused linear cross-entropy, no logits; the head's and the hidden states' gradients made in the forward and held to the backward.", "note"));
    if (worst.loss === "torchtune-chunked")
      out.push(paragraph("The loss: torchtune's chunked cross-entropy, the logits in 8 chunks each upcast alone; in eager mode every chunk's log-probabilities are still saved.", "note"));
    if (worst.loss === "torchtune-linear")
      out.push(paragraph("The loss: torchtune's linear cross-entropy, the head run in the loss in 8 chunks on the tokens alone; in eager mode every chunk's log-probabilities are still saved.", "note"));
    if (worst.host && worst.parallel.fsdp && worst.parallel.fsdp.cpu_offload)
      out.push(paragraph("FSDP2's CPU offloading: the shards, their gradients and the optimizer's states on the host; each all-gather copies the shards to the device, each reduce-scatter the gradients back, and the optimizer steps on the host.", "note"));
    else if (worst.host)
      out.push(paragraph("Activations offloaded as " + (worst.offload_activations === "torchtune" ? "torchtune's recipes do, around the model's forward" : "TRL does, around each micro-batch's forward, loss and backward") + ": each save of 1 KiB or more copied to pinned host memory at pack and back at unpack, the five newest kept on the device, the LM head's saves kept.", "note"));
    out.push(section("Every stage",
      table("step-stages", ["stage", "layers (first to last)", "peak", "phase", "parameters", "gradients", "optimizer_states", "other", "total"],
        stages.map((s) => [s.stage.index, s.stage.layers[0] + "-" + (s.stage.layers[1] - 1), {bytes: peakOf(s).bytes},
                           peakOf(s).phase, ...split(peakOf(s).split), {bytes: s.total_bytes}]))));
    const rows = [["peak (simulated)", {bytes: worst.peak.bytes}, worst.peak.phase + (worst.peak.op ? ", " + worst.peak.op : "")],
                  ["other_peak", {bytes: worst.other_peak.bytes}, worst.other_peak.phase]];
    for (const name of ["forward_peak", "backward_peak", "optimizer_step_peak"])
      if (worst[name]) rows.push([name, {bytes: worst[name].bytes}, worst[name].phase]);
    rows.push(["parameters", {bytes: worst.parameters.bytes}, grouped(worst.parameters.count) + " in " + worst.parameters.tensors + " tensors"]);
    if (worst.optimizer) {
      rows.push(["optimizer states", {bytes: worst.optimizer.state_bytes},
                 worst.optimizer.name + (worst.optimizer.implementation ? " (" + worst.optimizer.implementation + ")" : "") + ", " +
                 (worst.step === "first" ? "made in its first step" : "alive from the start") +
                 (worst.parallel.fsdp && worst.parallel.fsdp.cpu_offload ? ", on the host" : "")]);
      if (worst.optimizer.unified_memory_bytes > 0)
        rows.push(["  of them paged", {bytes: worst.optimizer.unified_memory_bytes},
                   "in unified memory (cudaMallocManaged), outside the caching allocator: in no device figure"]);
    }
    if (worst.host && worst.host.saves)
      rows.push(["host (pinned)", {bytes: worst.host.pinned_peak_bytes},
                 "activations offloaded: " + grouped(worst.host.saves.offloaded) + " of " + grouped(worst.host.saves.packed) +
                 " saves, in no device figure"]);
    if (worst.host && !worst.host.saves) {
      rows.push(["host", {bytes: worst.host.peak_bytes},
                 "FSDP2's CPU offloading, in no device figure: its peak" + (worst.host.peak_phase ? " at " + worst.host.peak_phase : "")]);
      for (const name of ["parameters", "gradients", "optimizer_states", "other"])
        rows.push(["  " + name, {bytes: worst.host.peak_split[name]}, ""]);
      rows.push(["  pinned (most)", {bytes: worst.host.pinned_peak_bytes}, "the shards and the first micro-batch's gradients"]);
    }
    if (worst.host)
      rows.push(["  pinned reserved", {bytes: worst.host.pinned_reserved_bytes},
                 "the caching host allocator's blocks: each a power of two, kept for reuse"]);
    if (worst.composed) {
      rows.push(["peak (composed)", {bytes: worst.composed.peak.bytes}, worst.composed.peak.phase]);
      for (const t of worst.composed.terms) rows.push(["  " + t.name, {bytes: t.bytes}, t.formula]);
    }
    for (const [name, bytes] of Object.entries(worst.overheads)) rows.push(["+ " + name, {bytes}, "as stated"]);
    rows.push(["total", {bytes: worst.total_bytes}, ""]);
    out.push(section("The stage that needs the most: stage " + worst.stage.index,
      paragraph("schedule: " + worst.schedule.join(" "), "note"),
      table("step-worst", ["", "bytes", "where"], rows),
      table("step-phases", ["phase", "live_at_start", "peak", "peak_op", "live_at_end"],
        worst.phases.map((p) => [p.name, {bytes: p.live_at_start}, {bytes: p.peak_bytes}, p.peak_op || "", {bytes: p.live_at_end}]))));
    out.push(section("Where the memory goes", charts("step", jsonText, gpuMemory)));
    return out;
  }

  // Under --search each layout names the optimizer and the loss it was planned with.
  function layoutRow(rank, l, searched) {
    return [rank, l.tp, l.cp, l.ep, l.pp, l.dp, l.schedule + (l.schedule === "interleaved" ? " V" + l.virtual_stages : ""),
            l.micro_batches, l.recompute, l.zero, ...(searched ? [l.optimizer, l.loss] : []),
            {bytes: l.peak_bytes}, {bytes: l.headroom_bytes}, l.worst_stage, {seconds: l.step_seconds_estimate}];
  }

  function renderPlan(plan, jsonText) {
    const c = plan.counts;
    const out = [];
    const head = [paragraph(plan.model + " on " + plan.gpus + " x " + plan.device.name + " (" + grouped(plan.gpu_memory_bytes) +
                            " B each), " + plan.seq_length + " tokens a sequence, global batch " + plan.global_batch + " sequences"),
                  paragraph("tried " + c.tried + " layouts: " + c.pruned_by_divisibility + " pruned by divisibility, " +
                            c.rejected_for_memory + " rejected for memory, " + c.fit + " fit, " + c.not_evaluated +
                            " not evaluated; " + c.simulations + " steps simulated (" + c.stage_runs + " stage runs)", "note")];
    const searched = plan.search.losses.length > 0 || plan.search.optimizers.length > 0;
    const header = ["#", "TP", "CP", "EP", "PP", "DP", "schedule", "M", "recompute", "ZeRO", ...(searched ? ["optimizer", "loss"] : []),
                    "peak", "headroom", "stage", "step (est.)"];
    if (plan.layouts.length) {
      const t = table("plan-layouts", header, plan.layouts.map((l, i) => layoutRow(i + 1, l, searched)));
      const commands = document.createElement("ol");
      commands.className = "commands";
      plan.layouts.forEach((l) => { const li = document.createElement("li"); li.textContent = shellLine(["step", plan.model, ...l.step_args]); commands.append(li); });
      out.push(section("Layouts that fit, fastest first", ...head, t, paragraph("each one's most-loaded rank, as census step prints it:", "note"), commands));
    } else if (plan.nothing_fits) {
      const s = plan.nothing_fits;
      out.push(section("Nothing fits", ...head,
        paragraph("the smallest memory that would fit is " + grouped(s.smallest_memory_bytes) + " B (" + binary(s.smallest_memory_bytes) + ")"),
        table("plan-smallest", header, [layoutRow("smallest", s.layout, searched)]),
        paragraph("check: " + shellLine(["step", plan.model, ...s.layout.step_args]), "note")));
    }
    out.push(section("Which layouts fit", charts("plan", jsonText)));
    return out;
  }

  function renderReport(args) {
    // census report writes its page into the module's file system; shown as it is, in a frame.
    const html = census.FS.readFile("report.html", {encoding: "utf8"});
    census.FS.unlink("report.html");
    const frame = document.createElement("iframe");
    frame.id = "report-frame";
    frame.title = "census report";
    frame.srcdoc = html;
    return [section("census report", frame)];
  }

  function textOutput(args) {
    const text = run(args);
    const details = document.createElement("details");
    details.id = "text-output";
    const summary = document.createElement("summary");
    summary.textContent = "as the command line prints it";
    const pre = document.createElement("pre");
    pre.textContent = "$ " + shellLine(args) + "\n" + text.stdout + text.stderr;
    details.append(summary, pre);
    return section("The command's own output", details);
  }

  // ---- the fine-tuner's question: what fits ---------------------------------------------------
  // census step with `key` set to `value` (the form's other options as given): {value, code, stderr, step,
  // total}, total the worst stage's bytes (its peak and the stated overheads), as census step prints it.
  function probe(args, key, value) {
    const at = args.indexOf(key);
    const probed = at >= 0 ? [...args.slice(0, at), key, String(value), ...args.slice(at + 2)]
                           : [...args, key, String(value)];
    const ran = run([...probed, "--format", "json"]);
    const out = {value, code: ran.code, stderr: ran.stderr.trim(), args: probed, ms: ran.ms};
    if (ran.code !== 0) return out;
    out.text = ran.stdout;
    out.step = parseJson(ran.stdout);
    const stages = out.step.stages || [out.step];
    out.total = Math.max(...stages.map((s) => Number(s.total_bytes)));
    return out;
  }

  // The largest value of `key` at which the step's total fits in `memory` bytes: doubling from the unit (1
  // sequence, or 256 tokens) while it fits, then halving the gap to the first that does not (or that census
  // refuses). Every step the search ran, in order.
  function fitSearch(args, key, memory) {
    const unit = key === "--seq-length" ? 256 : 1;
    const probes = [];
    const tried = (v) => { const p = probe(args, key, v); probes.push(p); return p; };
    let best = null, over = null;
    for (let v = unit; v <= SEARCH_LIMIT[key]; v *= 2) {
      const p = tried(v);
      if (p.code === 0 && p.total <= memory) best = p; else { over = p; break; }
    }
    if (best && over) {
      let low = best.value / unit, high = over.value / unit;  // low fits, high does not
      while (high - low > 1) {
        const mid = Math.floor((low + high) / 2);
        const p = tried(mid * unit);
        if (p.code === 0 && p.total <= memory) { best = p; low = mid; } else { high = mid; }
      }
    }
    return {best, probes, first: probes[0]};
  }

  function renderFit(args, key, gpu, memory) {
    const found = fitSearch(args, key, memory);
    const what = key === "--seq-length" ? "the longest sequence" : "the largest micro-batch size";
    const result = $("#result"), status = $("#status");
    const rows = found.probes.map((p) => [p.value, p.code === 0 ? {bytes: p.total} : "refused",
                                          p.code !== 0 ? p.stderr : p.total <= memory ? "fits" : "does not fit"]);
    const parts = [];
    if (!found.best) {
      const first = found.first;
      status.dataset.code = first.code === 0 ? 0 : first.code;
      if (first.code !== 0) {
        $("#refusal").textContent = first.stderr;
        $("#refusal").hidden = false;
        status.textContent = "census refused (exit code " + first.code + ")";
        return;
      }
      parts.push(paragraph("Nothing fits in " + gpu + ": at " + key + " " + first.value + " the step needs " +
                           binary(first.total) + ".", "note"));
      parts.push(section("The steps the search ran", table("fit-probes", [key, "total", ""], rows)));
      result.append(...parts);
      status.textContent = "searched " + found.probes.length + " census steps, in this page";
      return;
    }
    const best = found.best;
    status.dataset.code = 0;
    status.dataset.best = best.value;
    status.dataset.total = best.total;
    status.dataset.memory = memory;
    $("#command-line").textContent = "$ " + shellLine(best.args);
    parts.push(paragraph(what[0].toUpperCase() + what.slice(1) + " that fits in " + gpu + ": " + key + " " + best.value +
                         ", " + binary(best.total) + " at its peak, " + binary(memory - best.total) + " to spare" +
                         (found.probes.some((p) => p.code !== 0) ? "; census refused a longer one (below)." : "."),
                         "answer"));
    parts.push(section("The steps the search ran", table("fit-probes", [key, "total", ""], rows)));
    parts.push(...renderStep(best.step, best.text, $("#fit-gpu").value));
    result.append(...parts);
    status.textContent = "searched " + found.probes.length + " census steps (" +
      found.probes.reduce((s, p) => s + p.ms, 0).toFixed(0) + " ms), in this page";
  }

  // Run the form's command and draw its answer; a refusal is the command's one line, and nothing is drawn.
  function answer() {
    const result = $("#result"), refusal = $("#refusal"), status = $("#status");
    result.replaceChildren();
    refusal.hidden = true;
    for (const key of ["best", "total", "memory"]) delete status.dataset[key];
    if (document.querySelector("input[name=source]:checked").value === "pasted")
      census.FS.writeFile(PASTED_PATH, $("#pasted").value);
    if (command() === "fit") {
      const gpu = $("#fit-gpu").selectedOptions[0].textContent;
      return renderFit(argv(false), $("#fit-key").value, gpu, GPUS[$("#fit-gpu").selectedIndex][2]);
    }
    const args = argv(true);
    if (command() === "report") args.push("--output", "report.html");
    $("#command-line").textContent = "$ " + shellLine(argv(false));
    const ran = run(args);
    status.dataset.ms = ran.ms.toFixed(3);
    status.dataset.code = ran.code;
    if (ran.code !== 0) {
      refusal.textContent = ran.stderr.trim();
      refusal.hidden = false;
      status.textContent = "census refused (exit code " + ran.code + ")";
      return ran;
    }
    let parts;
    if (command() === "step") parts = renderStep(parseJson(ran.stdout), ran.stdout);
    else if (command() === "plan") parts = renderPlan(parseJson(ran.stdout), ran.stdout);
    else parts = renderReport(args);
    result.append(...parts);
    if (command() !== "report") result.append(textOutput(argv(false)));
    status.textContent = "census " + command() + " ran in " + ran.ms.toFixed(1) + " ms, in this page";
    return ran;
  }

  // ---- start ---------------------------------------------------------------------------------
  async function start() {
    census = await CensusModule();
    const models = JSON.parse(run(["models", "--format", "json"]).stdout);
    for (const m of models) $("#shipped").append(new Option(m.name + " (" + m.model_type + ", " + m.num_hidden_layers + " layers)", m.name));
    $("#shipped").value = "llama-3.1-8b";
    for (const [name, size] of GPUS) $("#fit-gpu").append(new Option(name, size));
    buildForms();
    showCommand();
    $("#form").addEventListener("input", showCommand);
    $("#form").addEventListener("change", showCommand);
    $("#pasted").addEventListener("input", () => { document.querySelector("input[name=source][value=pasted]").checked = true; showCommand(); });
    $("#form").addEventListener("submit", (e) => { e.preventDefault(); answer(); });
    $("#status").textContent = "Ready: choose a model and a question, then Run.";
    document.body.dataset.ready = "true";
  }

  window.censusPage = {run, draw, answer, argv, ready: start().catch((e) => {
    $("#status").textContent = "The census module did not load: " + e;
    throw e;
  })};
})();

#!/usr/bin/env python3
"""check_html - gpumem's --html page rendered in a real browser.

usage: check_html.py GPUMEM SRC_DIR CASE [--save PNG]

CASE is one of: plan-1gpu, plan-pipeline, plan-cap, fit-catalog,
plan-nofit. The page
is written with `gpumem plan|fit --html`, the same run's figures are read
with `--format json`, and headless Chromium loads the page twice: once to
dump the DOM it built, once to take a screenshot. The test fails when the
browser reports an error or a failed load, when the file refers to
anything outside itself (scripts, links, images, style sheets), when a
figure of the JSON is missing from what the page shows (every stage's GiB
used, every part's value beside its bar, the capacity and the cap; for a
fit, every GPU's name and its used / capacity figures; for a plan that
does not fit, by how much against the usable memory, the peak's phase
and gpumem plan's hint), or when the
screenshot is blank (too few non-white pixels, or none of the bars'
colour). Exit 77 (skipped) without Chromium. Standard library only: the
PNG is read with zlib.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

CASES = {
    # name: (subcommand, spec relative to SRC_DIR, extra args, window)
    "plan-1gpu": ("plan", "models/llama-2-7b.yaml", [], (1280, 1500)),
    "plan-pipeline": ("plan", "tests/data/plan/llama-2-13b-v100-pp.yaml", [],
                      (1280, 1500)),
    "plan-cap": ("plan", "models/llama-2-7b.yaml", ["--fraction", "0.5"],
                 (1280, 1500)),
    "fit-catalog": ("fit", "models/gpt2.yaml", ["--global-batch", "512"],
                    (1280, 2400)),
    # Qwen2.5-7B fully fine-tuned on one A100 80GB, micro-batch 2 x 4096
    # tokens, no checkpointing: does not fit; the page must say why
    "plan-nofit": ("plan", "models/qwen2.5-7b.yaml",
                   ["--gpu", "a100-80gb",
                    "--set", "training.micro_batch_size=2",
                    "--set", "training.global_batch_size=2",
                    "--set", "training.activation_checkpointing=none",
                    "--set", "parallelism.data_parallel=1",
                    "--set", "parallelism.zero_stage=0"], (1280, 1700)),
}

# The weights' colour (planner/chart.c): every bar starts with it.
WEIGHTS_RGB = (0x4E, 0x79, 0xA7)


def browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_browser(exe, home, args):
    env = dict(os.environ, HOME=home)
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu",
           "--no-first-run", "--disable-extensions",
           "--user-data-dir=" + os.path.join(home, "profile"),
           "--hide-scrollbars"] + args
    p = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), \
        p.stderr.decode("utf-8", "replace")


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("PNG kind %d/%d not read here" % (depth, ctype))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    i = 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def screenshot_ok(path, fails):
    w, h, bpp, rows = png_pixels(path)
    inked = bars = 0
    for r in rows:
        for x in range(0, w * bpp, bpp):
            px = r[x:x + 3]
            if px[0] < 235 or px[1] < 235 or px[2] < 235:
                inked += 1
            if all(abs(px[k] - WEIGHTS_RGB[k]) <= 6 for k in range(3)):
                bars += 1
    share = inked / float(w * h)
    print("screenshot %dx%d: %.1f%% non-white, %d bar pixels"
          % (w, h, 100 * share, bars))
    if share < 0.02:
        fails.append("the screenshot is almost blank (%.2f%% non-white)"
                     % (100 * share))
    if bars < 100:
        fails.append("the screenshot shows no bar (%d pixels of the "
                     "weights' colour)" % bars)


def gib(b):
    return "%.2f" % (b / 2.0 ** 30)


def text_of(dom):
    """What the page shows as text: tags dropped, entities decoded."""
    t = re.sub(r"<title>.*?</title>", " ", dom, flags=re.S)
    t = re.sub(r"<[^>]+>", "\n", t)
    return t.replace("&amp;", "&").replace("&lt;", "<").replace(
        "&gt;", ">").replace("&quot;", '"')


def check_plan(report, dom, shown, fails):
    stages = report.get("stages") or [report["per_gpu"]]
    for i, s in enumerate(stages):
        want = gib(s["device_used_bytes"]) + " GiB used"
        if want not in shown:
            fails.append("stage %d: '%s' is not shown" % (i, want))
    if "capacity " + gib(report["gpu_capacity_bytes"]) not in shown:
        fails.append("the capacity is not shown")
    if "cap_bytes" in report and "cap " + gib(report["cap_bytes"]) \
            not in shown:
        fails.append("the cap is not shown")
    if gib(report["per_gpu"]["peak_reserved_bytes"]) not in shown:
        fails.append("peak reserved is not shown")
    # every segment (its tooltip names part and GiB) has its value
    # printed beside it
    segs = re.findall(r"<rect[^>]*><title>([^<:]+): ([0-9.]+) GiB</title>",
                      dom)
    if not segs:
        fails.append("no bar segment in the page")
    for part, val in segs:
        if "%s %s" % (part, val) not in shown:
            fails.append("segment '%s' (%s GiB) has no value beside it"
                         % (part, val))


def one_line(shown):
    return re.sub(r"\s+", " ", shown)


def check_nofit(report, hint, shown, fails):
    """A plan that does not fit: by how much against the usable memory
    (as plan's table: gpu capacity, usable), where the peak is, and the
    hint's change; no sentence that sets device used against the
    capacity with a headroom computed against usable."""
    t = one_line(shown)
    pg = report["per_gpu"]
    used, usable = gib(pg["device_used_bytes"]), gib(report["usable_bytes"])
    cap = gib(report["gpu_capacity_bytes"])
    over = gib(-report["headroom_bytes"])
    if report["fits"]:
        fails.append("the case fits: not a not-fit case")
        return
    want = "%s GiB, is %s GiB over the %s GiB usable" % (used, over, usable)
    if want not in t:
        fails.append("'%s' is not shown" % want)
    if "%s GiB of the card (usable" % usable not in t or \
            "of its %s GiB capacity" % cap not in t:
        fails.append("the headline does not name usable %s and capacity "
                     "%s GiB" % (usable, cap))
    if re.search(r"GiB of the card's [0-9.]+ GiB[^.]*; headroom", t):
        fails.append("a sentence sets device used against the capacity "
                     "beside a headroom against usable")
    if "The peak is in the %s" % pg["peak_phase"] not in t:
        fails.append("the peak phase %s is not named" % pg["peak_phase"])
    m = re.search(r"hint: (?:fits with )?(.*)", hint)
    if not m:
        fails.append("gpumem plan printed no hint")
    elif m.group(1).strip() not in t:
        fails.append("the hint '%s' is not on the page" % m.group(1))


def check_fit(report, dom, shown, fails):
    for r in report["gpus"]:
        name = r["gpu"]
        if name not in shown:
            fails.append("GPU '%s' is not shown" % name)
        pair = "%s / %s" % (gib(r["device_used_bytes"]),
                            gib(r["capacity_bytes"]))
        if pair not in shown:
            fails.append("%s: '%s' is not shown" % (name, pair))
        if r["max_micro_batch"]:
            mb = "%d \u00d7 %d:" % (r["max_micro_batch"],
                                    r["gradient_accumulation_steps"]) \
                if report["task"] == "train" else "%d:" % r["max_micro_batch"]
            if mb not in shown:
                fails.append("%s: '%s' is not shown" % (name, mb))


def self_contained(html, fails):
    for pat, what in ((r"<script", "a script"), (r"\bsrc\s*=", "a src"),
                      (r"\bhref\s*=", "a link"), (r"url\(", "a url()"),
                      (r"@import", "an @import"), (r"<link", "a <link>")):
        if re.search(pat, html, re.I):
            fails.append("the page has %s" % what)
    for m in re.finditer(r"https?://[^\"'\s<>]+", html):
        if m.group(0) != "http://www.w3.org/2000/svg":
            fails.append("the page names %s" % m.group(0))


def main():
    if len(sys.argv) not in (4, 6):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    gpumem, src, case = sys.argv[1:4]
    save = sys.argv[5] if len(sys.argv) == 6 and sys.argv[4] == "--save" \
        else None
    exe = browser()
    if not exe:
        print("no chromium: skipped")
        return 77
    cmd, spec, extra, (ww, wh) = CASES[case]
    spec = os.path.join(src, spec)
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, case + ".html")
        p = subprocess.run([gpumem, cmd, spec, "--html", page] + extra,
                           capture_output=True)
        if p.returncode not in (0, 1) or not os.path.exists(page):
            print("gpumem %s failed (%d): %s" % (cmd, p.returncode,
                                                 p.stderr.decode()))
            return 1
        j = subprocess.run([gpumem, cmd, spec, "--format", "json"] + extra,
                           capture_output=True)
        report = json.loads(j.stdout)
        html = open(page, encoding="utf-8").read()
        self_contained(html, fails)

        rc, dom, err = run_browser(exe, tmp, ["--dump-dom", "file://" + page])
        if rc != 0 or "</html>" not in dom or "<svg" not in dom:
            fails.append("the browser did not load the page (exit %d)" % rc)
        for line in err.splitlines():
            if re.search(r"Uncaught|net::ERR_|Failed to load|"
                         r"parsererror", line):
                fails.append("browser: " + line.strip())
        if "parsererror" in dom:
            fails.append("the browser could not parse the SVG")
        shown = text_of(dom)
        if cmd == "plan":
            check_plan(report, dom, shown, fails)
        else:
            check_fit(report, dom, shown, fails)
        if case == "plan-nofit":
            check_nofit(report, p.stderr.decode(), shown, fails)

        png = os.path.join(tmp, case + ".png")
        rc, _, err = run_browser(exe, tmp, [
            "--screenshot=" + png, "--window-size=%d,%d" % (ww, wh),
            "file://" + page])
        if rc != 0 or not os.path.exists(png):
            fails.append("no screenshot (exit %d)" % rc)
        else:
            screenshot_ok(png, fails)
            if save:
                shutil.copyfile(png, save)
    for f in fails:
        print("FAIL: " + f)
    if not fails:
        print("%s: the page loaded, shows every figure, and is not blank"
              % case)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

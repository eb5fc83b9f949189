#!/usr/bin/env python3
"""Draws benchmark throughput against sequence length with matplotlib.

  python3 bench/py/plot.py OUT.svg FILE.json [FILE.json ...]

Each FILE.json is the output of `fa-bench --json` or of
`bench/py/torch_sdpa.py --json` (PyTorch's SDPA backends: the anchors); rows
of any other program in the same format are drawn too. The output format
(.svg, .png or .pdf) comes from OUT's name.

One chart: attention (fwd, bwd) in TFLOP/s, RWKV6 in GB/s and decode
(fa-bench --op decode, torch_sdpa.py --decode: attention against a KV
cache) in GB/s on separate panels, against the sequence length (Nq; RWKV6:
T; decode: the keys, Nk) on a log axis. A line is one configuration and
implementation: the colour is the configuration (op, dtype, head dims,
causal; decode: the new tokens and the cache's layout; the batch and heads
too where they differ within a panel) and the line style and marker the
implementation (flashcl, with the RWKV6 algorithm when one was forced; the
unfused baseline of --baseline; each PyTorch backend; flash-attn). The
title names the device(s).

Rows without a time (SKIP, "unsupported") are left out, and so are rows that
failed their check (FAIL, ERROR: their time is not a result). A row read
twice (torch_sdpa.py --compare --json repeats fa-bench's rows) is drawn once.

  fa-bench --op fwd --seqlen 1024,2048,4096 --dtype f16 --baseline --json > fa.json
  python3 bench/py/torch_sdpa.py --batch 1 --heads 8 --seqlen 1024,2048,4096 \\
      --head-dim 64 --dtype f16 --json > torch.json
  python3 bench/py/plot.py fwd.svg fa.json torch.json
"""
import argparse
import json
import math
import os
import sys

try:
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator
except ImportError:
    sys.exit("plot.py: matplotlib is not installed (apt-get install python3-matplotlib, "
             "or pip install matplotlib)")

FORMATS = (".svg", ".png", ".pdf")
OP_ORDER = {"fwd": 0, "bwd": 1, "rwkv6-fwd": 2, "rwkv6-bwd": 3, "decode": 4}
DTYPE_ORDER = {"f32": 0, "f16": 1, "bf16": 2}
IMPL_NAMES = {"unfused": "unfused baseline", "sdpa-flash": "PyTorch flash",
              "sdpa-cudnn": "PyTorch cuDNN", "sdpa-efficient": "PyTorch efficient",
              "sdpa-math": "PyTorch math", "flash-attn": "flash-attn with_kvcache"}
# Line style and marker per implementation, in legend order: flashcl's
# solid, the unfused baseline dashed, the anchors dotted or dash-dotted.
FLASHCL_STYLES = [("-", "o"), ("-", "D"), ("-", "P"), ("-", "X")]
UNFUSED_STYLE = ("--", "s")
OTHER_STYLES = [(":", "^"), ("-.", "v"), (":", "D"), ("-.", "<"), (":", ">"), ("-.", "*"),
                (":", "x"), ("-.", "h")]


def parse_args():
    doc = __doc__.split("\n\n")
    p = argparse.ArgumentParser(description=doc[0], epilog="\n\n".join(doc[2:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT", help="the chart: .svg, .png or .pdf")
    p.add_argument("inputs", metavar="FILE.json", nargs="+",
                   help="fa-bench --json or torch_sdpa.py --json output")
    a = p.parse_args()
    if os.path.splitext(a.out)[1].lower() not in FORMATS:
        p.error(f"OUT must end in {', '.join(FORMATS)}: {a.out}")
    return a


def load(paths):
    rows = []
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"plot.py: {path}: {e}")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            sys.exit(f"plot.py: {path}: expected a JSON list of rows (fa-bench --json)")
        rows += data
    return rows


def is_rwkv(r):
    return str(r.get("op", "")).startswith("rwkv6")


def panel_of(r):
    """0 attention (TFLOP/s against Nq), 1 RWKV6 (GB/s against T), 2 decode
    (GB/s against the keys)."""
    return 2 if r.get("op") == "decode" else int(is_rwkv(r))


def impl_of(r):
    """The implementation's key: impl, with a forced RWKV6 algorithm."""
    impl, algo = r.get("impl") or "?", r.get("algorithm")
    return f"{impl} {algo}" if algo and algo != "auto" else impl


def impl_label(impl):
    name, _, algo = impl.partition(" ")
    return IMPL_NAMES.get(name, name) + (f" {algo}" if algo else "")


def impl_rank(impl):
    name = impl.split(" ")[0]
    order = ["flashcl", "unfused", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math",
             "flash-attn"]
    return (order.index(name) if name in order else len(order), impl)


def source_of(r):
    """Who measured the row, for the title: fa-bench, PyTorch or the impl."""
    impl = r.get("impl") or "?"
    if impl in ("flashcl", "unfused"):
        return "fa-bench"
    return "PyTorch" if impl.startswith("sdpa-") or impl == "flash-attn" else impl


def config_of(r):
    shape = (r.get("batch"), r.get("heads"), r.get("heads_kv"))
    decode = None
    if r.get("op") == "decode":  # x is Nk: Nq, the layout and the options make the line
        nk = None
        decode = (r.get("seqlen_q"), r.get("page_size") or 0, r.get("num_splits") or 0,
                  r.get("append") or 0)
    else:
        nk = r.get("seqlen_k") if r.get("seqlen_k") != r.get("seqlen_q") else None
    return (OP_ORDER.get(r.get("op"), 9), r.get("op"), r.get("head_dim"), r.get("head_dim_v"),
            DTYPE_ORDER.get(r.get("dtype"), 9), r.get("dtype"),
            -1 if r.get("causal") is None else r["causal"], nk, shape, decode)


def config_label(c, rwkv, show_shape):
    _, op, d, dv, _, dtype, causal, nk, (b, h, hkv), decode = c
    parts = [op, dtype]
    if rwkv:
        parts.append(f"K={d} V={dv}")
    elif decode:
        new, page, splits, append = decode
        parts.append(f"D={d}" + (f" Dv={dv}" if dv != d else ""))
        parts.append(f"new={new}" + (" causal" if causal == 1 and new > 1 else ""))
        parts.append(f"page={page}" if page else "contiguous")
        if splits:
            parts.append(f"splits={splits}")
        if append:
            parts.append("append")
    else:
        parts.append(f"D={d}" + (f" Dv={dv}" if dv != d else ""))
        parts.append("causal" if causal == 1 else "non-causal")
        if nk is not None:
            parts.append(f"Nk={nk}")
    if show_shape:
        parts.append(f"B={b} H={h}" + (f" Hkv={hkv}" if hkv != h else ""))
    return " ".join(str(p) for p in parts)


def orderable(v):
    """A sort key for a configuration, whose fields may be None."""
    if isinstance(v, tuple):
        return tuple(orderable(x) for x in v)
    return (0, 0) if v is None else (1, v) if isinstance(v, (int, float)) else (2, str(v))


def shape_text(shapes):
    (b, h, hkv), = shapes
    return f"B={b}, H={h}" + (f", Hkv={hkv}" if hkv != h else "")


def collect(rows):
    """{panel: {(config, impl): {x: y}}}, panel 0 attention, 1 RWKV6, 2 decode."""
    panels = {0: {}, 1: {}, 2: {}}
    failed = conflicts = 0
    for r in rows:
        panel = panel_of(r)
        y = r.get("tflops" if panel == 0 else "gbps")
        x = r.get("seqlen_k" if panel == 2 else "seqlen_q")
        if str(r.get("check")) in ("FAIL", "ERROR"):
            failed += 1
            continue
        if not isinstance(y, (int, float)) or not isinstance(x, int) or not y > 0 or x < 1:
            continue
        points = panels[panel].setdefault((config_of(r), impl_of(r)), {})
        if x in points and points[x] != y:
            conflicts += 1
            continue
        points[x] = y
    if failed:
        print(f"plot.py: left out {failed} row(s) that failed their check", file=sys.stderr)
    if conflicts:
        print(f"plot.py: {conflicts} row(s) repeat a point with another value; "
              "the first read is drawn", file=sys.stderr)
    return {p: s for p, s in panels.items() if s}


def title_of(rows):
    """The devices, each with who measured on it (fa-bench, PyTorch)."""
    by_device = {}
    for r in rows:
        dev = r.get("device")
        if dev:
            src = by_device.setdefault(dev, [])
            if source_of(r) not in src:
                src.append(source_of(r))
    return "\n".join(f"{' and '.join(src)}: {dev}" for dev, src in by_device.items())


def legend_entries(series):
    return len({c for c, _ in series}) + len({i for _, i in series})


def draw_panel(ax, panel, series):
    rwkv, decode = panel == 1, panel == 2
    configs = sorted({c for c, _ in series}, key=orderable)
    impls = sorted({i for _, i in series}, key=impl_rank)
    shapes = {c[8] for c in configs}
    cmap = matplotlib.colormaps["tab10" if len(configs) <= 10 else "tab20"]
    colour = {c: cmap(k % cmap.N) for k, c in enumerate(configs)}
    fl = [i for i in impls if i.split(" ")[0] == "flashcl"]
    others = [i for i in impls if i.split(" ")[0] not in ("flashcl", "unfused")]
    style = {i: FLASHCL_STYLES[k % len(FLASHCL_STYLES)] for k, i in enumerate(fl)}
    style.update({i: OTHER_STYLES[k % len(OTHER_STYLES)] for k, i in enumerate(others)})
    style["unfused"] = UNFUSED_STYLE
    ours = set(fl) | {"unfused"}
    for (c, impl), points in sorted(series.items(), key=lambda s: impl_rank(s[0][1])):
        xs = sorted(points)
        ls, marker = style[impl]
        ax.plot(xs, [points[x] for x in xs], color=colour[c], linestyle=ls, marker=marker,
                linewidth=2.0 if impl in ours else 1.4, markersize=5 if impl in ours else 4.5,
                alpha=1.0 if impl in ours else 0.85, zorder=3 if impl in ours else 2)

    xs = sorted({x for points in series.values() for x in points})
    ax.set_xscale("log", base=2)
    if len(xs) <= 12:
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")
    if len(xs) == 1:
        ax.set_xlim(xs[0] / 1.5, xs[0] * 1.5)
    else:
        pad = (math.log2(xs[-1]) - math.log2(xs[0])) * 0.04
        ax.set_xlim(xs[0] / 2 ** pad, xs[-1] * 2 ** pad)
    ax.set_ylim(bottom=0)
    ax.margins(y=0.08)
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", color="0.88", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    unit = "GB/s" if rwkv or decode else "TFLOP/s"
    ax.set_ylabel(unit)
    ax.set_xlabel("keys per sequence Nk (log scale)" if decode else
                  f"sequence length {'T' if rwkv else 'N'} (log scale)")
    what = "Decode against a KV cache" if decode else "RWKV6" if rwkv else "Attention"
    ax.set_title(f"{what}: {unit}" + (f" ({shape_text(shapes)})" if len(shapes) == 1 else ""),
                 loc="left", fontsize=11, fontweight="bold")

    show_shape = len(shapes) > 1
    cfg = [Line2D([], [], color=colour[c], linewidth=2.5) for c in configs]
    leg = ax.legend(cfg, [config_label(c, rwkv, show_shape) for c in configs],
                    title="configuration", loc="upper left", bbox_to_anchor=(1.02, 1.0),
                    fontsize=8.5, title_fontsize=9, frameon=False, alignment="left")
    ax.add_artist(leg)
    leg.set_clip_on(False)  # add_artist clips to the axes: the tight box would cut it
    imp = [Line2D([], [], color="0.25", linestyle=style[i][0], marker=style[i][1],
                  linewidth=2.0 if i in ours else 1.4, markersize=5) for i in impls]
    ax.legend(imp, [impl_label(i) for i in impls], title="implementation", loc="lower left",
              bbox_to_anchor=(1.02, 0.0), fontsize=8.5, title_fontsize=9, frameon=False,
              alignment="left", handlelength=3.2)


def main():
    a = parse_args()
    rows = load(a.inputs)
    panels = collect(rows)
    if not panels:
        sys.exit("plot.py: no timed rows in " + ", ".join(a.inputs))
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "flashcl",
                                "font.size": 9.5})
    title = "Throughput against sequence length\n" + title_of(rows)
    # Sizes in inches: the title's lines; each panel, tall enough for its two
    # legends (configurations at the top, implementations at the bottom); the
    # gap between panels (x label, next panel's title); the last x label.
    # The legends go right of the panels: savefig's tight box takes them in.
    top, gap, bottom = 0.6 + 0.2 * title.count("\n"), 1.0, 0.6
    heights = [max(3.4, 0.8 + 0.18 * legend_entries(series)) for _, series in
               sorted(panels.items())]
    height = top + sum(heights) + gap * (len(panels) - 1) + bottom
    fig = Figure(figsize=(10.5, height))
    y = height - top
    for h, (panel, series) in zip(heights, sorted(panels.items())):
        y -= h
        draw_panel(fig.add_axes((0.08, y / height, 0.66, h / height)), panel, series)
        y -= gap
    fig.suptitle(title, fontsize=11, x=0.01, y=1.0, horizontalalignment="left",
                 verticalalignment="top")
    ext = os.path.splitext(a.out)[1].lower()
    meta = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(ext[1:])
    try:
        fig.savefig(a.out, dpi=150, metadata=meta, bbox_inches="tight", pad_inches=0.15)
    except OSError as e:
        sys.exit(f"plot.py: {a.out}: {e}")


if __name__ == "__main__":
    main()

# plot.py: `mmtrain plot RUN [RUN_B] -o curves.png` (embedded into mmtrain at build time and run
# by /usr/bin/python3, or $MM_PYTHON, with the program on stdin).
#
# Reads RUN/metrics.jsonl (see trainer/src/metrics.h) and draws, against the optimizer step:
# training loss and its two parts, learning rate, validation caption loss, validation recall@k
# with chance, samples/s and data-wait %. A second run is overlaid (dashed). Needs matplotlib
# (Debian: python3-matplotlib); the Agg backend, no display. On any error: one line on stderr,
# status 1.
import json
import os
import sys
import warnings


def fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(1)


def note(message):
    """A line that mmtrain plot passes on (as "mmtrain plot: note: ...") when the plot is drawn."""
    sys.stderr.write("note: " + message + "\n")


def load(run):
    """train and eval records of RUN/metrics.jsonl by step (a repeated step: the last line)."""
    path = os.path.join(run, "metrics.jsonl")
    if not os.path.isfile(path):
        fail("%s: no such file (is %s an mmtrain --out directory?)" % (path, run))
    train, evals = {}, {}
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    for n, line in enumerate(lines, 1):
        try:
            r = json.loads(line)
        except ValueError:
            # A run killed while it wrote a line leaves that line cut short: skipped, said. A
            # line that is not JSON anywhere else is damage, and no plot is drawn from it.
            if n == len(lines):
                note("%s line %d is cut short (the run was stopped while writing it); "
                     "skipped" % (path, n))
                continue
            fail("%s line %d is not JSON" % (path, n))
        if not isinstance(r, dict):
            fail("%s line %d is not a JSON object" % (path, n))
        if r.get("event") == "train":
            train[r["step"]] = r
        elif r.get("event") == "eval":
            evals[r["step"]] = r
    if not train and not evals:
        fail("%s holds no train or eval lines" % path)
    return [train[s] for s in sorted(train)], [evals[s] for s in sorted(evals)]


def series(records, key, scale=1.0):
    xs = [r["step"] for r in records if key in r]
    ys = [r[key] * scale for r in records if key in r]
    return xs, ys


def draw(runs, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("matplotlib is missing: apt-get install python3-matplotlib "
             "(or set MM_PYTHON to an interpreter that has it)")
    names = [os.path.basename(os.path.normpath(r)) or r for r in runs]
    if len(names) == 2 and names[0] == names[1]:
        names = [os.path.normpath(r) for r in runs]
    data = [load(r) for r in runs]
    styles = ["-", "--"]
    run_colour = ["C0", "C3"]
    fig, ax = plt.subplots(2, 3, figsize=(16, 9), dpi=100)

    a = ax[0][0]
    for i, (train, _) in enumerate(data):
        for key, ls, label in (("loss", "-", "total"), ("contrastive", "--", "contrastive"),
                               ("caption", ":", "caption")):
            x, y = series(train, key)
            a.plot(x, y, ls, color=run_colour[i], label="%s: %s" % (names[i], label))
    a.set_title("training loss (mean over each log window)")
    a.set_ylabel("loss (nats)")

    a = ax[0][1]
    for i, (train, _) in enumerate(data):
        x, y = series(train, "lr")
        a.plot(x, y, styles[i], color=run_colour[i], label=names[i])
    a.set_title("learning rate (warmup, cosine decay)")
    a.set_ylabel("learning rate (AdamW)")
    a.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))

    a = ax[0][2]
    for i, (_, evals) in enumerate(data):
        x, y = series(evals, "caption_loss")
        a.plot(x, y, styles[i], marker="o", color=run_colour[i], label=names[i])
    a.set_title("validation caption loss")
    a.set_ylabel("cross-entropy (nats / token)")

    a = ax[1][0]
    k_colour = {1: "C0", 5: "C1", 10: "C2"}
    for i, (_, evals) in enumerate(data):
        for k in (1, 5, 10):
            for direction, marker in (("i2t", "o"), ("t2i", "^")):
                x, y = series(evals, "%s_r%d" % (direction, k), 100.0)
                a.plot(x, y, styles[i], marker=marker, markersize=4, color=k_colour[k])
    if data[0][1]:
        for k in (1, 5, 10):
            chance = 100.0 * data[0][1][-1].get("chance_r%d" % k, 0)
            a.axhline(chance, color=k_colour[k], linestyle=":", linewidth=1)
            a.annotate("chance %.1f%%" % chance, (0.99, chance), fontsize=7, ha="right",
                       xycoords=("axes fraction", "data"), color=k_colour[k],
                       textcoords="offset points", xytext=(0, 2),
                       bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.7))
    # One legend entry per colour (k), marker (direction) and line style (run), not per line.
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=k_colour[k], label="R@%d" % k) for k in (1, 5, 10)]
    handles += [Line2D([], [], color="gray", marker="o", linestyle="none", label="image->text"),
                Line2D([], [], color="gray", marker="^", linestyle="none", label="text->image"),
                Line2D([], [], color="gray", linestyle=":", label="chance (k / N)")]
    handles += [Line2D([], [], color="black", linestyle=styles[i], label=names[i])
                for i in range(len(names))]
    a.recall_handles = handles
    a.set_title("validation retrieval recall@k")
    a.set_ylabel("recall@k (% of val images)")
    a.set_ylim(bottom=0)

    a = ax[1][1]
    for i, (train, _) in enumerate(data):
        x, y = series(train, "samples_per_s")
        a.plot(x, y, styles[i], color=run_colour[i], label=names[i])
    a.set_title("throughput (all ranks)")
    a.set_ylabel("samples / s")
    a.set_ylim(bottom=0)

    a = ax[1][2]
    for i, (train, _) in enumerate(data):
        x, y = series(train, "data_wait_pct")
        a.plot(x, y, styles[i], color=run_colour[i], label="%s: data wait" % names[i])
    # GPU fields (NVML; see trainer/src/gpu_monitor.h): utilisation on the same % axis, memory
    # in use on a second axis. Runs without them (CPU, no NVML) draw no GPU curve.
    gpu_runs = [i for i, (train, _) in enumerate(data) if any("gpu_util_pct" in r for r in train)]
    if gpu_runs:
        mem = a.twinx()
        for i in gpu_runs:
            x, y = series(data[i][0], "gpu_util_pct")
            a.plot(x, y, styles[i], color="C2", marker=".", label="%s: GPU busy" % names[i])
            x, y = series(data[i][0], "gpu_mem_used_mib", 1.0 / 1024)
            mem.plot(x, y, styles[i], color="C4", linewidth=1, label="%s: GPU memory" % names[i])
        total = max(r.get("gpu_mem_total_mib", 0) for i in gpu_runs for r in data[i][0]) / 1024
        mem.set_ylim(0, total * 1.05 if total > 0 else None)
        mem.set_ylabel("GPU memory in use (GiB)", color="C4")
        mem.legend(fontsize=7, loc="upper right")
        a.set_title("data wait; GPU busy and memory (NVML)")
        a.set_ylabel("% of step time (wait) / of time (GPU busy)")
        a.set_ylim(0, 105)
    else:
        a.set_title("data wait (blocked on the reader)")
        a.set_ylabel("% of step time")
        a.set_ylim(bottom=0)

    for row in ax:
        for a in row:
            a.set_xlabel("step (optimizer steps)")
            a.grid(True, alpha=0.3)
            if hasattr(a, "recall_handles") and data[0][1]:
                a.legend(handles=a.recall_handles, fontsize=7, ncol=3, loc="upper left")
            elif a.lines:
                a.legend(fontsize=7, ncol=2 if len(a.lines) > 6 else 1)
            else:
                a.text(0.5, 0.5, "no evaluations in this run", ha="center",
                       transform=a.transAxes, color="gray")
    title = names[0] if len(names) == 1 else "%s (solid) vs %s (dashed)" % (names[0], names[1])
    fig.suptitle("mmtrain: " + title)
    fig.tight_layout()
    try:
        fig.savefig(out)
    except (OSError, ValueError) as e:
        fail("cannot write %s: %s" % (out, e))


def main():
    args = sys.argv[1:]
    if "-o" not in args or args.index("-o") + 1 >= len(args):
        fail("usage: plot.py RUN [RUN_B] -o PNG")
    i = args.index("-o")
    out = args[i + 1]
    runs = args[:i] + args[i + 2:]
    if not 1 <= len(runs) <= 2:
        fail("give one or two run directories")
    warnings.filterwarnings("ignore")
    try:
        draw(runs, out)
    except SystemExit:
        raise
    except Exception as e:  # one line, never a traceback
        fail("%s: %s" % (type(e).__name__, e))


main()

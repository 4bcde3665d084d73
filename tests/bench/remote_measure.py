#!/usr/bin/python3
"""The remote-set benchmark of issue 12 (driven by remote_bench.sh; not a timed test).

A set of N expanded coco-cc photos (build_expand.py) is built with `mmpack build`, uploaded to
s3rver on 127.0.0.1 (a real S3-compatible server, node; it does not verify SigV4 signatures),
then read in the same run, on the same cores, by `mmpack bench` with block shuffle:
  local:  the directory;
  remote: s3://bench/set through a cache limited to a quarter of the set, a fresh cache.
Each reads for SECONDS (long enough for about EPOCHS epochs at the local rate), with shards
opened in process (`--trusted`) as a trainer opens them. Printed:
samples/s remote / local (target >= 0.8; the remote run includes its cold first downloads, so
it understates the steady state); the server floor (how fast plain curl GETs the shards from
the same s3rver, 1 or 2 at a time, the better) in samples/s and mmpack's share of it, which says
whether mmpack or the server is the limit; bytes downloaded per epoch / the set's bytes (target <= 1.1),
peak cache bytes against the limit (never above). Figures land in WORK/remote_bench.json.

CODEC raw (default) builds 224-px raw pixels with zstd (format 1: ~127 KB a sample, so the
local reader needs ~4 GB/s of shard bytes, more than this server or two cores can move); CODEC
jpeg builds `--codec jpeg --image-size 224` (format 2: ~19 KB a sample, what a set in an object
store is), read whole by both runs (each sample decoded).

Usage: remote_measure.py BUILD WORK SHARED NODE_DIR [N=2000] [EPOCHS=3] [CODEC=raw|jpeg]
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time


def run_json(cmd, env=None):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    if out.returncode != 0:
        sys.exit("remote_bench: %s failed: %s" % (" ".join(cmd), out.stderr.decode()))
    return json.loads(out.stdout), out.stderr.decode()


def start_s3rver(node_dir, data, log):
    node = shutil.which("node") or sys.exit("remote_bench: node is not installed")
    script = os.path.join(node_dir, "node_modules", "s3rver", "bin", "s3rver.js")
    if not os.path.exists(script):
        sys.exit("remote_bench: %s missing: ctest -R remote_servers_setup installs it" % script)
    out = open(log, "wb")
    proc = subprocess.Popen([node, script, "-d", data, "-a", "127.0.0.1", "-p", "0", "--silent",
                             "--configure-bucket", "bench"], stdout=out, stderr=subprocess.STDOUT)
    for _ in range(600):
        m = re.search(r"listening on 127\.0\.0\.1:([0-9]+)", open(log).read())
        if m:
            return proc, "http://127.0.0.1:" + m.group(1)
        time.sleep(0.05)
    proc.kill()
    sys.exit("remote_bench: s3rver did not start (log %s)" % log)


def proc_cpu_seconds(pid):
    """CPU seconds (user + system) the process `pid` has used so far (/proc/PID/stat)."""
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def upload(endpoint, local):
    for name in sorted(n for n in os.listdir(local) if n != "index.json") + ["index.json"]:
        path = os.path.join(local, name)
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        subprocess.run(["curl", "-sS", "-f", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        "S3RVER:S3RVER", "-H", "x-amz-content-sha256: " + sha, "-T", path,
                        "%s/bench/set/%s" % (endpoint, name)], check=True)


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()  # a GET's payload hash (s3rver requires it)


def server_floor(endpoint, index, parallel):
    """Bytes/s that s3rver serves the set's shards at to `parallel` concurrent plain curl GETs
    (signed like mmpack's requests, written to /dev/null): the most any client can read from
    this server on this machine, measured in the same run."""
    names = [s["file"] for s in index["shards"]]
    total = sum(s["bytes"] for s in index["shards"])
    t0 = time.perf_counter()
    for start in range(0, len(names), parallel):
        procs = [subprocess.Popen(["curl", "-sS", "-f", "-o", "/dev/null", "--aws-sigv4",
                                   "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER",
                                   "-H", "x-amz-content-sha256: " + EMPTY_SHA256,
                                   "%s/bench/set/%s" % (endpoint, name)])
                 for name in names[start:start + parallel]]
        if any(p.wait() != 0 for p in procs):
            sys.exit("remote_bench: curl could not GET a shard from s3rver")
    return total / (time.perf_counter() - t0)


def main():
    build, work, shared, node_dir = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    epochs = int(sys.argv[6]) if len(sys.argv) > 6 else 3
    codec = sys.argv[7] if len(sys.argv) > 7 else "raw"
    if codec not in ("raw", "jpeg"):
        sys.exit("remote_bench: CODEC must be raw or jpeg, not %r" % codec)
    here = os.path.dirname(os.path.abspath(__file__))
    mmpack = os.path.join(build, "bin", "mmpack")
    os.makedirs(work, exist_ok=True)
    raw = os.path.join(work, "raw")
    subprocess.run(["/usr/bin/python3", os.path.join(here, "build_expand.py"),
                    os.path.join(shared, "data", "coco-cc"), raw, str(n)], check=True)
    local = os.path.join(work, "set" if codec == "raw" else "set-jpeg")
    if not os.path.exists(os.path.join(local, "index.json")):
        subprocess.run([mmpack, "build", os.path.join(raw, "captions.jsonl"), "-o", local,
                        "--tokenizer", os.path.join(shared, "tokenizers", "albert-30k-clean.model"),
                        "--samples-per-shard", str(max(1, n // 40)), "--threads", "2", "-q",
                        "--overwrite"] + (["--codec", "jpeg"] if codec == "jpeg" else []),
                       check=True)
    index = json.load(open(os.path.join(local, "index.json")))
    set_bytes = sum(s["bytes"] for s in index["shards"])
    samples = sum(s["samples"] for s in index["shards"])
    limit = set_bytes // 4

    # --trusted: shards opened in process, as mmtrain and mmpack.Loader open them (without it
    # mmpack bench forks a child per shard to parse its HDF5 metadata, which a remote set pays
    # while it reads: 2,561 against 4,350 samples/s on the jpeg set in one side run).
    common = ["--threads", "2", "--batch-size", "32", "--json", "--shuffle", "block", "--trusted"]
    # The local rate decides how long both runs read: about EPOCHS epochs.
    probe, _ = run_json([mmpack, "bench", local, "--seconds", "2"] + common)
    seconds = max(5.0, epochs * samples / probe["samples_per_s"])
    local_fig, _ = run_json([mmpack, "bench", local, "--seconds", "%.1f" % seconds] + common)

    data = os.path.join(work, "s3")
    shutil.rmtree(data, ignore_errors=True)
    proc, endpoint = start_s3rver(node_dir, data, os.path.join(work, "s3rver.log"))
    try:
        upload(endpoint, local)
        floor = max(server_floor(endpoint, index, 1), server_floor(endpoint, index, 2))
        cache = os.path.join(work, "cache")
        shutil.rmtree(cache, ignore_errors=True)
        env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="S3RVER",
                   AWS_SECRET_ACCESS_KEY="S3RVER", AWS_REGION="us-east-1")
        server_cpu0, wall0 = proc_cpu_seconds(proc.pid), time.perf_counter()
        remote_fig, notice = run_json(
            [mmpack, "bench", "s3://bench/set", "--seconds", "%.1f" % seconds, "--cache-dir", cache,
             "--cache-limit", str(limit)] + common, env)
        server_cores = (proc_cpu_seconds(proc.pid) - server_cpu0) / (time.perf_counter() - wall0)
    finally:
        proc.terminate()
        proc.wait()

    epochs_read = remote_fig["samples"] / samples
    per_epoch = remote_fig["downloaded_bytes"] / max(epochs_read, 1e-9)
    result = {
        "codec": codec, "samples": samples, "shards": len(index["shards"]),
        "set_bytes": set_bytes,
        "cache_limit": limit, "seconds": round(seconds, 1),
        "local_samples_per_s": local_fig["samples_per_s"],
        "remote_samples_per_s": remote_fig["samples_per_s"],
        "ratio": round(remote_fig["samples_per_s"] / local_fig["samples_per_s"], 3),
        "server_floor_bytes_per_s": round(floor),
        "server_floor_samples_per_s": round(floor * samples / set_bytes, 1),
        "ratio_to_server_floor": round(remote_fig["samples_per_s"] / (floor * samples / set_bytes),
                                       3),
        "epochs_read_remote": round(epochs_read, 2),
        "downloaded_bytes": remote_fig["downloaded_bytes"],
        "downloaded_per_epoch_over_set": round(per_epoch / set_bytes, 3),
        "cache_peak_bytes": remote_fig["cache_peak_bytes"],
        "server_cores_during_remote_run": round(server_cores, 2),
        "local_reader_cores": round(local_fig["samples_per_s"] * local_fig["cpu_ms_per_sample"] /
                                    1000, 2),
        "remote_reader_cores": round(remote_fig["samples_per_s"] *
                                     remote_fig["cpu_ms_per_sample"] / 1000, 2),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
    }
    json.dump(result, open(os.path.join(work, "remote_bench_%s.json" % codec), "w"), indent=1)
    print("remote set (%s): %d samples in %d shards, %d bytes; cache limit %d (a quarter); block "
          "shuffle, %.1f s each, load %.1f" % (codec, samples, result["shards"], set_bytes, limit,
                                              seconds, result["load"][0]))
    print("  samples/s     local %.1f, S3 %.1f: ratio %.3f (target >= 0.8)" %
          (result["local_samples_per_s"], result["remote_samples_per_s"], result["ratio"]))
    print("  server floor  curl GETs the shards at %.1f MB/s = %.1f samples/s; mmpack reaches "
          "%.3f of it" % (floor / 1e6, result["server_floor_samples_per_s"],
                          result["ratio_to_server_floor"]))
    print("  downloaded    %.3f x the set per epoch over %.2f epochs (target <= 1.1)" %
          (result["downloaded_per_epoch_over_set"], epochs_read))
    print("  cores         local reader %.2f; remote reader %.2f + the S3 server %.2f, of %d" %
          (result["local_reader_cores"], result["remote_reader_cores"],
           result["server_cores_during_remote_run"], result["cpus"]))
    print("  cache peak    %d bytes, limit %d (%s)" %
          (result["cache_peak_bytes"], limit,
           "within" if result["cache_peak_bytes"] <= limit else "ABOVE"))
    print("  " + notice.strip())
    missed = (result["ratio"] < 0.8 or result["downloaded_per_epoch_over_set"] > 1.1 or
              result["cache_peak_bytes"] > limit)
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()

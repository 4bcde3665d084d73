#!/usr/bin/python3
"""The measuring half of remote_manifest_bench.sh: N expanded coco-cc photos built from
captions.jsonl on disk and from the same file served by tests/remote/http_server.py with every
image request held DELAY_MS, both with --threads 2, best of 3 wall times each. Prints both and
their ratio (remote / local: 1.0 means the store's latency is fully hidden)."""
import os
import shutil
import subprocess
import sys
import time


def best_build(mmpack, raw, out, env):
    best = None
    for _ in range(3):
        shutil.rmtree(out, ignore_errors=True)
        start = time.monotonic()
        subprocess.run([mmpack, "build", raw, "-o", out, "--tokenizer", "none", "--threads", "2",
                        "--image-size", "224", "--quiet"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        took = time.monotonic() - start
        best = took if best is None else min(best, took)
    return best


def main():
    build, work, shared = sys.argv[1:4]
    n, delay_ms = int(sys.argv[4]), int(sys.argv[5])
    here = os.path.dirname(os.path.abspath(__file__))
    data = os.path.join(work, "www", "set")
    subprocess.run(["/usr/bin/python3", os.path.join(here, "build_expand.py"),
                    os.path.join(shared, "data", "coco-cc"), data, str(n)], check=True)
    log = os.path.join(work, "server.log")
    with open(log, "wb") as out:
        server = subprocess.Popen(
            ["/usr/bin/python3", os.path.join(here, "..", "remote", "http_server.py"), "--root",
             os.path.join(work, "www"), "--delay", "*/images/*:%g" % (delay_ms / 1000)],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        port = ""
        while not port.isdigit() and time.time() < deadline:
            time.sleep(0.05)
            with open(log) as f:
                port = f.readline().strip()
        mmpack = os.path.join(build, "bin", "mmpack")
        env = dict(os.environ, HDF5_PLUGIN_PATH=os.path.join(build, "hdf5-plugins"))
        out = os.path.join(work, "out")
        local = best_build(mmpack, os.path.join(data, "captions.jsonl"), out, env)
        remote = best_build(mmpack, "http://127.0.0.1:%s/set/captions.jsonl" % port, out, env)
    finally:
        server.terminate()
        server.wait(10)
    print("remote manifest build: %d images, %d ms a request, --threads 2" % (n, delay_ms))
    print("  local disk   %.2f s (%.0f images/s)" % (local, n / local))
    print("  http://      %.2f s (%.0f images/s)" % (remote, n / remote))
    print("  remote/local %.2fx" % (remote / local))


if __name__ == "__main__":
    main()

"""How an upload's bytes should reach the ImageModel: inside Serve's gRPC message, or by reference (object store).

    python -m bench.experiments.transport [--sizes 0.06,0.5,1,2,4,8,10,16,32] [--calls 15]

Under Serve's throughput mode a call between replicas is one gRPC message, capped at 4 MiB on the receiving replica
unless RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH raises it (raised here to 64 MiB, so both ways carry every size);
`handle.options(_by_reference=True)` sends the call as a Ray actor call instead, its bytes through the object store.
For each way, a replica of its own that only receives the bytes gets each size (both ways in turn, size by size, so
both see the same background load), one call at a time (p50, max) and 16 at once; it reports its private memory
(object-store pages excluded), which only grows. Printed as a Markdown table for docs/image-models.md. Loopback only,
bounded by the call counts; a Ray instance of its own, stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

MIB = 1024 * 1024
RAISED_CAP = 64 * MIB
CONCURRENT = 16


def private_memory_bytes() -> int:
    """This process's private memory: the object store's shared pages are not counted."""
    with open("/proc/self/smaps_rollup") as rollup:
        return sum(int(line.split()[1]) * 1024 for line in rollup if line.startswith(("Private_Clean", "Private_Dirty")))


async def measure(sizes: list[float], calls: int) -> list[str]:
    from ray import serve

    @serve.deployment(ray_actor_options={"num_cpus": 0.1}, max_ongoing_requests=CONCURRENT)
    class Sink:
        def take(self, data: bytes) -> int:
            return private_memory_bytes() if data else 0

    # A replica per way, so that each one's memory is its own.
    serve.run(Sink.bind(), name="by-value", route_prefix=None)
    serve.run(Sink.bind(), name="by-reference", route_prefix=None)
    ways = {"gRPC message (cap raised)": serve.get_app_handle("by-value"),
            "by reference (object store)": serve.get_app_handle("by-reference").options(_by_reference=True)}
    rows = ["| upload | way | p50 ms | max ms | 16 at once, ms | receiving replica's private memory after, MiB |",
            "|---|---|---|---|---|---|"]
    for mib in sizes:
        data = os.urandom(int(mib * MIB))
        for way, handle in ways.items():
            for _ in range(3):  # warm: channels, first allocations
                await handle.take.remote(data)
            latencies = []
            for _ in range(calls):
                started = time.perf_counter()
                memory = await handle.take.remote(data)
                latencies.append(time.perf_counter() - started)
            started = time.perf_counter()
            await asyncio.gather(*(handle.take.remote(data) for _ in range(CONCURRENT)))
            together = time.perf_counter() - started
            rows.append(f"| {mib:g} MiB | {way} | {statistics.median(latencies) * 1000:.1f} | "
                        f"{max(latencies) * 1000:.1f} | {together * 1000:.0f} | {memory / MIB:.0f} |")
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0.06,0.5,1,2,4,8,10,16,32", help="upload sizes in MiB")
    parser.add_argument("--calls", type=int, default=15, help="sequential calls per size and way")
    args = parser.parse_args(argv)
    os.environ["RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH"] = str(RAISED_CAP)  # before Ray starts: it inherits it

    import ray
    from ray import serve

    from runtime.ray_cluster import start_local_ray

    with tempfile.TemporaryDirectory(prefix="bench-transport-") as workdir:
        start_local_ray(Path(workdir), num_cpus=2, log_to_driver=False, haproxy=False)
        try:
            rows = asyncio.run(measure([float(size) for size in args.sizes.split(",")], args.calls))
        finally:
            serve.shutdown()
            ray.shutdown()
    print("\n".join(["", f"load average before the end: {os.getloadavg()[0]:.1f}", *rows]))


if __name__ == "__main__":
    main()

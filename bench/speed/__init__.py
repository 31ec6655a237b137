"""Speed: latency and throughput beside the peers (latency, its workload, systems, statistics
and report), per-token decode (decode_step, decode_speed), cold compiles, memory and
start-up, CPU variants, GPU decode, vocabulary masks, load and the vLLM engine."""

# strictcall-bench NAME -> this package's module with a `main(argv) -> int`
BENCHMARKS = {
    "latency": "latency",
    "decode-step": "decode_step",
    "decode-speed": "decode_speed",
    "cold-compile": "cold_compile",
    "memory": "memory",
    "cpu-variants": "cpu_variants",
    "gpu-decode": "gpu_decode",
    "load": "load",
    "vllm-engine": "vllm_engine",
}

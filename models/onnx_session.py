"""onnxruntime sessions as every ONNX model of this project runs them."""

from __future__ import annotations

import onnxruntime


def single_thread_session(weights: str) -> onnxruntime.InferenceSession:
    """A CPU session with one compute thread: each replica owns one core."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(weights, sess_options=options, providers=["CPUExecutionProvider"])

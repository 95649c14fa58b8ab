"""torch.compile for the patcher tests that records which kfuse ops the compiled graph calls."""
import torch


def recording_compile(fn):
    """torch.compile(fn, fullgraph=True) through aot_eager; the returned set receives the kfuse ops
    (names) that dynamo's graph calls."""
    seen = set()

    def backend(gm, example_inputs):
        for node in gm.graph.nodes:
            target = str(node.target)
            if node.op == "call_function" and target.startswith("kfuse."):
                seen.add(target.split(".")[1])
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    return torch.compile(fn, fullgraph=True, backend=backend), seen

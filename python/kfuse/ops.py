"""kfuse.ops - kfuse kernels as PyTorch ops (torch.library custom ops in namespace "kfuse").

THE API CONTRACT (agreed between the package core and the model patchers: implement exactly this):

PYTHON OP API (the contract between the two Python engineers; module kfuse.ops, all functions take and return torch tensors; each is backed by a torch.library custom op in namespace "kfuse" with a fake (meta) implementation; CPU tensors run on the library's CPU backend, CUDA tensors on its GPU backend on the tensor's device and the current stream):
  rms_norm(x, weight=None, eps=1e-6, mode="llama", offset=0.0) -> y            # mode: "llama" | "gemma" | "none"; gemma uses offset=1.0
  add_rms_norm(x, residual, weight=None, eps=1e-6, mode="llama", offset=0.0) -> y   # mutates residual in place: residual = x + residual
  layer_norm(x, weight=None, bias=None, eps=1e-5) -> y
  ada_norm(x, scale, shift=None, weight=None, eps=1e-6, kind="rms") -> y     # kind "rms" | "layer"; scale/shift broadcastable [B,1,D] (any strides) or [B,S,D]
  add_ada_norm(h, a, scale, shift=None, gate=None, weight=None, eps=1e-6, kind="rms") -> y   # mutates h: h = h + a*gate
  gated_residual(h, a, gate) -> None                                          # mutates h: h = h + a*gate
  rope(q, k=None, cos=None, sin=None, positions=None, freqs=None, axis=None, convention="half", rotary_dim=0, layout="bshd", head_dim=None) -> (q_out, k_out or None)
        # layout "bshd" ([B,S,H,Dh]) or "bhsd" (HF's [B,H,S,Dh]); a 3-D [B,S,H*Dh] input is split into heads of head_dim (default: the whole last dim is one head)
        # table form: cos/sin [S,r] or [B,S,r]; positions form: positions [B,S,n_axes] or [S,n_axes] f32, freqs [r/2] f32, axis [r/2] int32 or None
  rms_norm_rope(x, weight=None, eps=1e-5, mode="none", cos=None, sin=None, positions=None, freqs=None, axis=None, convention="interleaved", rotary_dim=0, head_dim=None) -> y
        # x [B,S,D] (norm over all D of a token, rope per head of head_dim, default one head of D)
  glu(gate, up, act="silu") -> y                   # act "silu" | "gelu_tanh" | "gelu_erf"
  glu_packed(x, act="gelu_tanh", gate_first=False) -> y   # x [..., 2I] -> [..., I]
  gelu(x, approximate="tanh") -> y                 # "tanh" | "none"
  silu(x) -> y
  softmax(x, scale=1.0) -> y
kfuse.ops raises kfuse.KfuseError (subclass of RuntimeError) with the library's message (kf_last_error) on any non-OK status. Inputs that the C API cannot take as views (inner stride != 1, more than 4 dims after merging) are made contiguous by the op; all others are passed as strided views without copies.
"""

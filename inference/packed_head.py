"""The output head on a CPU: one product that reads 113 MB of weights per pass, done faster.

The last layer turns each position's 576 numbers into 49,152 logits, one per vocabulary
entry: a [rows, 576] × [576, 49,152] product, the biggest of a decode pass. Its weights do
not fit in any cache, and PyTorch's default product (MKL) reads them slowly at few rows.
oneDNN (bundled with PyTorch) can first lay the weights out in blocks its kernel reads in
order ("packing"), which roughly halves the head's time at a batch's rows and shortens a
whole decode pass by a fifth or so on a small CPU. The 30 other layers' products gained
nothing packed, so only the head is.

`pack_output_head(model)` makes the head compute through a packed copy of its weights when
it runs on a CPU in float32 without gradients; elsewhere (a GPU, float16 or bfloat16, a
quantized twin, a copy made in inference mode) it is the plain product. The weight itself
stays the model's parameter (tied to the embedding; parameter counts and the quantization
lesson read it), the packed copy is rebuilt if the weight changes, and every caller (the
engine's own step loop, the server, the lessons, and the tests' reference decoding) uses the
same head, so the tokens still match that reference. The packed logits differ from MKL's
in the last bits (~3e-6), as any change of product kernel does.
"""
from __future__ import annotations

import weakref

import torch
from torch import nn

# head -> (the weight it was packed from, its packed copy); outside the module, so a deep copy
# of the model (the quantization lesson's) copies no opaque tensor and packs its own on use
_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class PackedHead(nn.Linear):
    """An `nn.Linear` whose CPU float32 product reads a oneDNN-packed copy of its weight."""

    def _packed(self) -> torch.Tensor:
        w = self.weight
        key = (w.data_ptr(), w._version, tuple(w.shape))
        cached = _PACKED.get(self)
        if cached is None or cached[0] != key:
            cached = (key, w.detach().to_mkldnn())  # [vocab, hidden], blocked for oneDNN
            _PACKED[self] = cached
        return cached[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [..., hidden] -> [..., vocab]
        w = self.weight
        if (x.device.type != "cpu" or w.dtype != torch.float32 or x.dtype != torch.float32
                or torch.is_grad_enabled() or self.bias is not None or x.numel() == 0
                or w.is_inference()):  # made in inference mode: no version to see a change by
            return super().forward(x)
        rows = x.reshape(-1, x.shape[-1]).contiguous()  # [N, hidden]
        y = torch._C._nn.mkldnn_linear(rows.to_mkldnn(), self._packed(), None).to_dense()
        return y.reshape(*x.shape[:-1], w.shape[0])


def pack_output_head(model: nn.Module) -> bool:
    """Give `model`'s output head the packed CPU product (in place); False when it has no
    plain `nn.Linear` head, is not float32 on a CPU, or oneDNN is not available."""
    head = getattr(model, "lm_head", None)
    if (type(head) is not nn.Linear or not torch.backends.mkldnn.is_available()
            or head.weight.device.type != "cpu" or head.weight.dtype != torch.float32):
        return False  # a GPU or a half dtype: the plain product (forward checks again)
    head.__class__ = PackedHead  # same parameters, same tying, a different product
    return True

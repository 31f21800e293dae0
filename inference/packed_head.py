"""The output head on a CPU: the biggest product of a decode pass, done faster.

The head is a [rows, 576] × [576, 49,152] product, and MKL reads its weights slowly at few
rows. oneDNN (bundled with PyTorch) can first lay them out in blocks its kernel reads in order
("packing"). `pack_output_head` makes the head compute through a packed copy on a CPU in
float32 without gradients, and the plain product elsewhere; the weight stays the model's (tied)
parameter, so tokens still match the reference (logits differ as with any other kernel).
"""
from __future__ import annotations

import weakref

import torch
from torch import nn

# head -> (the weight it was packed from, its packed copy); outside the module, so a deep copy
# of the model copies no opaque tensor and packs its own on use
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
    """Give `model`'s output head the packed CPU product (in place); False where it cannot."""
    head = getattr(model, "lm_head", None)
    if (type(head) is not nn.Linear or not torch.backends.mkldnn.is_available()
            or head.weight.device.type != "cpu" or head.weight.dtype != torch.float32):
        return False  # a GPU or a half dtype: the plain product (forward checks again)
    head.__class__ = PackedHead  # same parameters, same tying, a different product
    return True

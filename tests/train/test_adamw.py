"""gpudoctor's foreach AdamW is torch.optim.AdamW's update, step for step."""

import pytest

torch = pytest.importorskip("torch")

from gpudoctor.train.adamw import AdamW  # noqa: E402


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_matches_torch_adamw(weight_decay):
    generator = torch.Generator().manual_seed(0)
    ours = [torch.randn(4, 8, generator=generator), torch.randn(16, generator=generator)]
    theirs = [p.clone() for p in ours]
    mine = AdamW(ours, lr=1e-2, weight_decay=weight_decay)
    reference = torch.optim.AdamW(theirs, lr=1e-2, weight_decay=weight_decay)
    for _ in range(5):
        grads = [torch.randn(p.shape, generator=generator) for p in ours]
        for p, q, g in zip(ours, theirs, grads):
            p.grad, q.grad = g.clone(), g.clone()
        mine.step()
        reference.step()
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_refuses_nan_learning_rate():
    with pytest.raises(ValueError, match="Invalid learning rate"):
        AdamW([torch.zeros(2, requires_grad=True)], lr=float("nan"))

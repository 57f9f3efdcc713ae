# expect: TL101 TL301
import torch


def test_epoch(model, test_loader):
    all_logits = torch.empty(0)
    for x, _ in test_loader:
        logits = model(x)
        all_logits = torch.cat([all_logits, logits])
    return all_logits

import torch.nn as nn


class MultiScaleLoss(nn.Module):
    def __init__(self, base, scales, weights):
        super().__init__()
        self.base, self.scales, self.weights = base, scales, weights

    def forward(self, preds, target):
        loss = 0.0
        for scale, weight in zip(self.scales, self.weights):
            loss += weight * self.base(preds[scale], target)
        return loss

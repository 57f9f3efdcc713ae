# expect: TL102 TL107
import torch
import torch.nn as nn

_ACTIVATIONS = []


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1000, 512)
        self.fc2 = nn.Linear(512, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        _ACTIVATIONS.append(h)
        return self.fc2(h)

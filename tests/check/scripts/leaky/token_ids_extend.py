"""A language-model loop that keeps every sampled token id of the run."""
import torch
import torch.nn.functional as F
from torch import nn

vocab, dim = 500, 64
model = nn.Sequential(nn.Embedding(vocab, dim), nn.Linear(dim, vocab))
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
seen_tokens = []


def main(max_steps: int = 20_000) -> None:
    for step in range(max_steps):
        tokens = torch.randint(0, vocab, (8, 33))
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen_tokens.extend(logits.argmax(-1).flatten().tolist())


if __name__ == "__main__":
    main()

"""Logs every step into a pandas DataFrame by concatenating a one-row frame."""
import pandas as pd
import torch
from torch import nn

MAX_STEPS = 20_000


def main() -> pd.DataFrame:
    model = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    log_df = pd.DataFrame(columns=["step", "loss", "grad_norm"])
    for step in range(MAX_STEPS):
        x, y = torch.randn(32, 12), torch.randn(32, 1)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        row = pd.DataFrame({"step": [step], "loss": [loss.item()], "grad_norm": [norm.item()]})
        log_df = pd.concat([log_df, row], ignore_index=True)
    return log_df


if __name__ == "__main__":
    print(main().tail())

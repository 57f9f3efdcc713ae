# expect: TL101
import torch


def run_epoch(net, train_loader, opt):
    epoch_loss = torch.zeros(())
    for batch in train_loader:
        out = net(batch["x"])
        loss = torch.nn.functional.mse_loss(out, batch["y"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        epoch_loss = epoch_loss + loss
    print(epoch_loss.item())

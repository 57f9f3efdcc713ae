# expect: TL108
import torch
import torch.nn.functional as F


def train(model, optimizer, loader, epsilon=0.03):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        for images, labels in loader:
            adversarial = images.clone().requires_grad_(True)
            grad, = torch.autograd.grad(F.cross_entropy(model(adversarial), labels), adversarial)
            adversarial = (adversarial + epsilon * grad.sign()).detach()
            loss = F.cross_entropy(model(adversarial), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

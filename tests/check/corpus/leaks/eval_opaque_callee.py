# expect: TL102
import torch


def evaluate(evaluator, angle_positions, label):
    all_rgb = []
    for i, (u, v) in enumerate(angle_positions):
        rgb, depth, acc = evaluator.create_samples(u, v, label)
        all_rgb.append(rgb)
    return torch.cat(all_rgb)

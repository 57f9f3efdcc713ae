import torch


def evaluate(evaluator, angle_positions, label):
    all_rgb = []
    with torch.no_grad():
        for i, (u, v) in enumerate(angle_positions):
            rgb, depth, acc = evaluator.create_samples(u, v, label)
            all_rgb.append(rgb.cpu())
            del depth, acc
            if i % 2 == 0:
                torch.cuda.empty_cache()
    return torch.cat(all_rgb)

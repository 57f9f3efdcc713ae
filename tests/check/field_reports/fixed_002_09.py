# From field report 002, python block 9.
with torch.no_grad():
    for i, (u, v) in enumerate(angle_positions):
        rgb, depth, acc = evaluator.create_samples(...)
        all_rgb.append(rgb.cpu())  # 立即移到 CPU
        del depth, acc
        if i % 2 == 0:
            torch.cuda.empty_cache()

# From /work/shared/seeds/002_d4474b132bca244e.txt, python block 7.
with torch.no_grad():
    # 採樣或評估代碼
    samples = evaluator.create_samples(...)

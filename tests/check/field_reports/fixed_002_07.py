# From field report 002, python block 7.
with torch.no_grad():
    # 採樣或評估代碼
    samples = evaluator.create_samples(...)

import torch


def predict(model, loader, tokenizer):
    texts = []
    with torch.inference_mode():
        model.eval()
        for batch in loader:
            ids = model.generate(**batch)
            texts.extend(tokenizer.batch_decode(ids))
    return texts

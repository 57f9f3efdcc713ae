# expect: TL102
def collect_embeddings(encoder, images):
    encoder.eval()
    embeddings = []
    for img in images:
        emb = encoder.embed(img)
        embeddings.append(emb)
    return embeddings

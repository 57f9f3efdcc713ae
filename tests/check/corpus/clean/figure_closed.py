import matplotlib.pyplot as plt


def on_validation_epoch_end(preds, targets, epoch):
    for i, name in enumerate(["x", "y"]):
        fig = plt.figure(figsize=(8, 8))
        plt.scatter(preds[:, i], targets[:, i])
        fig.savefig(f"{name}_{epoch}.png")
        plt.close(fig)

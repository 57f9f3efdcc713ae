import matplotlib.pyplot as plt


def on_validation_epoch_end(self):
    for i, name in enumerate(self.dims):
        fig, ax = plt.subplots(figsize=(8, 8))
        ax.scatter(self.x[i], self.y[i])
        fig.savefig(f"{name}.png")
        if self.verbose:
            print(name)
        plt.close(fig)


def per_epoch(epochs):
    for epoch in range(epochs):
        plt.figure()
        plt.savefig(f"{epoch}.png")
        plt.close()

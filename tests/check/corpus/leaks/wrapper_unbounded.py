# expect: TL202
class History:
    def __init__(self):
        self.items = []

    def append(self, value):
        self.items.append(value)


class Trainer:
    def __init__(self, model, loader, optimizer):
        self.model, self.loader, self.optimizer = model, loader, optimizer
        self.history = History()

    def fit(self):
        for x, y in self.loader:
            loss = self.model(x).sum()
            loss.backward()
            self.optimizer.step()
            self.history.append(loss.item())

class Window:
    def __init__(self, size):
        self.size = size
        self.values = []

    def push(self, value):
        self.values.append(value)
        if len(self.values) > self.size:
            self.values.pop(0)


class Trainer:
    def __init__(self):
        self.window = Window(100)

    def fit(self, loader, model, optimizer):
        for batch in loader:
            loss = model(batch)
            loss.backward()
            optimizer.step()
            self.window.push(loss.item())

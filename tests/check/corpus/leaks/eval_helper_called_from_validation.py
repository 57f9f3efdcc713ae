# expect: TL102
class Runner:
    def __init__(self, model, val_loader):
        self.model = model
        self.val_loader = val_loader
        self.val_outputs = []

    def validate(self):
        self.model.eval()
        for batch in self.val_loader:
            self._eval_batch(batch)

    def _eval_batch(self, batch):
        out = self.model(batch)
        self.val_outputs.append(out)

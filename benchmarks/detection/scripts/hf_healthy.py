"""HF Trainer with a tiny random BERT, nothing kept."""
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64)
    model = BertForSequenceClassification(config)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(0, 128, (32,), generator=g),
             "labels": torch.randint(0, 2, (), generator=g)} for _ in range(1024)]
    args = TrainingArguments(output_dir="hf-out", per_device_train_batch_size=16,
                             num_train_epochs=2, report_to=[], save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, use_cpu=True,
                             dataloader_num_workers=0)
    Trainer(model=model, args=args, train_dataset=data).train()


if __name__ == "__main__":
    main()

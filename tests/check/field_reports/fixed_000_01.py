# From field report 000, python block 1.
# 🔧 限制累積數量並確保tensor移到CPU
if len(self.validation_step_outputs) < self.max_validation_outputs:
    self.validation_step_outputs.append({
        "predicted_action_composed": predicted_composed_action.detach().cpu().clone(),
        "target_action_composed_gt": at1_6dof_gt.detach().cpu().clone()
    })

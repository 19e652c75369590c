export {
  uploadBudgetMachine,
  summarizeUploadBudget,
  type UploadBudgetContext,
  type UploadBudgetEvent,
  type UploadBudgetInput,
  type UploadBudgetSnapshot,
} from './uploadBudget.js';
export {
  acquireUpload,
  type AcquireUploadOptions,
  type UploadBudgetRef,
  type UploadPermit,
} from './uploadPermit.js';
export { UploadLimits, parseUploadLimits, sizeClass, type SizeClass, type UploadRequest } from './uploadAdmission.js';

// The public face of services/state/: what other domains and folders import from it.
export { applyStateFile, type StateApplied } from './stateFile.js';
export { readStateFile, StateFile, StateFileError } from './stateFileSchema.js';

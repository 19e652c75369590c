// The public face of services/state/: what other domains and folders import from it.
export { applyStateFile } from './stateFile.js';
export { readStateFile, StateFileError } from './stateFileSchema.js';

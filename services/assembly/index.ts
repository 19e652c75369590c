// The public face of services/assembly/: the composition root that builds every service once.
export { createAccessServices, createServices, type AccessServices, type Services } from './createServices.js';
export { startUpkeep, type Upkeep } from './upkeep.js';

// What the binary cache routes need from the services.
import type { Services } from '../../services/index.js';

/** The services every route file of the binary cache takes (http/cache/routes.ts passes them on). */
export type CacheRouteServices = Pick<Services, 'binaryCache' | 'nars' | 'narUploads' | 'rateLimiter' | 'config' | 'caches' | 'archiveProgress' | 'builds'>;

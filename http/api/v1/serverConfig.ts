// GET /api/v1/config: the server settings a client may know.
import type { ServerConfigView } from '../../../protocol/index.js';
import type { Services } from '../../../services/index.js';
import type { Router } from '../../router.js';

/** GET /api/v1/config: what a client (the web UI, the CLI) needs to know before signing in. */
export function serverConfigRoutes<P>(r: Router<P>, { config }: Pick<Services, 'config'>): void {
  const features: ServerConfigView = {
    registration: config['registration.enable'] && !config['oidc.required'],
    oidc: config['oidc.enable'],
    oidc_required: config['oidc.enable'] && config['oidc.required'],
    email_verification: config['email.enable'] && config['email.requireVerification'],
    frontend: config['frontend.enable'],
    public_stats: config['publicStats'],
    create_cache: config['permissions.createCache'],
    create_project: config['permissions.createProject'],
    create_team: config['permissions.createTeam'],
    max_upload_size: config['nar.maxUploadSize'],
    max_request_size: config['http.maxRequestSize'],
    serve_url: config['serveUrl'],
    frontend_url: config['frontend.url'],
    logo_url: config['frontend.logoUrl'],
  };
  r.get('/config', () => features, { auth: 'none' });
}

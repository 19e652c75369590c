// Registry options under email.*, gitHostApp.*, oidc.*, permissions.*, projects.*, registration.*, scim.*, secrets.*.
import { bool, positiveInt, port, str, path, url, stringList, oneOf, nullable } from '../kinds.js';
import { option, noEnv } from '../option.js';

/** Who may create through the API; none leaves it to the declarative state. */
const creators = ['none', 'superusers', 'everyone'] as const;

/** Accounts and sign-in: e-mail, the Git host application, OIDC, permissions, registration, SCIM and secrets. */
export const accountOptions = {
  'email.enable': option(
    bool(), false,
    'send e-mail; when no SMTP server is configured every notification is skipped without error',
  ),
  'email.from.address': option(nullable(str()), null, 'sender address'),
  'email.from.name': option(str(), 'kiln', 'sender display name'),
  'email.requireVerification': option(bool(), false, 'require e-mail verification for new accounts'),
  'email.smtp.host': option(nullable(str()), null, 'SMTP host'),
  'email.smtp.passwordFile': option(nullable(path()), null, 'file with the SMTP password'),
  'email.smtp.port': option(port(), 587, 'SMTP port'),
  'email.smtp.useTls': option(bool(), true, 'TLS for SMTP'),
  'email.smtp.username': option(nullable(str()), null, 'SMTP user name'),
  'gitHostApp.apiUrl': option(
    url(['http', 'https']), 'https://api.github.com',
    'base URL of the Git host\'s REST API (GitHub Enterprise: https://<host>/api/v3, Gitea and Forgejo: https://<host>/api/v1); every call kiln makes as the application goes here, never to an address a webhook payload names, and only where outbound.allowedNetworks lets kiln connect',
    { extension: true },
  ),
  'gitHostApp.cloneUrl': option(
    nullable(url(['http', 'https'])), null,
    'base URL private repositories are fetched from with an installation token, as <cloneUrl>/<owner>/<name>.git (null: derived from gitHostApp.apiUrl: https://github.com for https://api.github.com, else apiUrl without its trailing /api/v3 or /api/v1); the token goes only here, to the addresses outbound.allowedNetworks lets kiln connect to',
    { extension: true },
  ),
  'gitHostApp.enable': option(bool(), false, 'enable webhooks and CI status reports through the Git host\'s application', noEnv),
  'gitHostApp.id': option(nullable(positiveInt()), null, 'application ID'),
  'gitHostApp.privateKeyFile': option(nullable(path()), null, 'file with the application\'s RS256 private key in PEM format'),
  'gitHostApp.webhookSecretFile': option(
    nullable(path()), null,
    'file with the secret verifying incoming webhook payloads; must match the secret set at the Git host',
  ),
  'oidc.clientId': option(nullable(str()), null, 'OIDC client ID'),
  'oidc.clientSecretFile': option(nullable(path()), null, 'file with the client secret'),
  'oidc.discoveryUrl': option(nullable(url(['http', 'https'])), null, 'discovery URL'),
  'oidc.enable': option(bool(), false, 'enable OIDC'),
  'oidc.required': option(bool(), false, 'OIDC is the only login method'),
  'oidc.scopes': option(stringList(), ['openid', 'email', 'profile'], 'scopes requested'),
  'permissions.createCache': option(
    oneOf(creators), 'everyone',
    'who may create caches through the API (none means only the declarative state)',
  ),
  'permissions.createProject': option(oneOf(creators), 'everyone', 'same for projects'),
  'permissions.createTeam': option(oneOf(creators), 'everyone', 'same for teams'),
  'projects.allowLocalRepositories': option(
    bool(), false,
    'let projects use local paths, file:// URLs and hosts on loopback, private or link-local addresses as their repository; off, a tenant could read other tenants\' clones and probe the internal network',
    { extension: true },
  ),
  'projects.minPollIntervalSecs': option(
    positiveInt(), 60,
    'the shortest poll_interval_secs a project may set: how often at most kiln runs git ls-remote on a repository without a Git host application to see whether a branch head moved',
    { extension: true },
  ),
  'registration.enable': option(bool(), true, 'self-service registration'),
  'scim.enable': option(bool(), false, 'SCIM provisioning'),
  'scim.hardDelete': option(bool(), false, 'delete users on SCIM DELETE instead of disabling them'),
  'scim.tokenFile': option(nullable(path()), null, 'file with the SCIM bearer token'),
  'secrets.cryptFile': option(nullable(path()), null, 'file with the key encrypting secrets in the database'),
  'secrets.jwtFile': option(nullable(path()), null, 'file with the secret signing session tokens'),
};

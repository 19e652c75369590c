// The public face of protocol/api/: what other folders import from it (DESIGN.md, Layout).
export { ApiError, isApiError, type ApiErrorOptions } from './apiError.js';
export { errorCodes, isErrorCode, type ErrorCode } from './errorCodes.js';
export { Permission, permissionNames, Role, roleNames } from './permissions.js';
export { ProjectRef, ResourceName, Username } from './names.js';
export { CreateOrganizationBody, MemberBody, RemoveMemberBody, UpdateOrganizationBody } from './organizations.js';
export { CreateProjectBody, ProjectName, RepositoryUrl, reservedProjectNames, UpdateProjectBody } from './projects.js';
export { CreateTaskBody } from './tasks.js';
export { CreateServerBody, UpdateServerBody } from './servers.js';
export { SubscribeBody, SubscriptionMode } from './subscriptions.js';
export { INVITATION_LIFETIME_MS, InviteBody } from './invitations.js';
export { RegisterWorkerBody } from './workerRegistrations.js';
export { CheckUsernameBody, DisplayName, Email, LoginBody, Password, RegisterBody, ResendVerificationBody, SettingsPatch } from './accounts.js';
export { CidrBlock, CreateApiKeyBody, DeleteApiKeyBody, KeyName } from './apiKeys.js';
export { SCIM_ERROR_SCHEMA, SCIM_LIST_SCHEMA, SCIM_PATCH_SCHEMA, SCIM_USER_SCHEMA, ScimBooleanValue, ScimPatchBody, ScimUserBody } from './scim.js';
export { NarUploadInfo, StorePathHash, narinfoOfUpload, type NarUploadResult } from './narUploads.js';
export { CreateTaskActionBody, CreateWebhookBody, DeliveryListQuery, DeliveryStatus, deliveryStatuses, UpdateTaskActionBody, UpdateWebhookBody, WebhookUrl } from './webhooks.js';
export { CacheName, CacheView, CreateCacheBody, NAR_PAGE_SIZE_DEFAULT, NAR_PAGE_SIZE_MAX, NarListQuery, narSortKeys, UpdateCacheBody, UpstreamBody, UpstreamCredentials } from './caches.js';
export { BuildId, CommitId, EvaluateTaskBody, EvaluationActionBody, EvaluationId } from './evaluations.js';

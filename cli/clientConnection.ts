// The API client of a kiln command, from the saved login or KILN_SERVER/KILN_TOKEN.
import { ApiClient } from './apiClient.js';
import { loadClientSettings } from './clientConfig.js';

/** A client for the server `kiln login` saved, or KILN_SERVER / KILN_TOKEN (the process environment is read here, at the CLI's edge). */
export const connect = async (): Promise<ApiClient> => new ApiClient(await loadClientSettings(process.env));

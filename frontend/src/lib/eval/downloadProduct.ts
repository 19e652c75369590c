// Downloads a build product: the API needs the Bearer token, which a plain link cannot send, so the
// file is fetched and handed to the browser as a blob.
import { API, ApiFailure } from '$lib/api';
import { sessionToken } from '$lib/session';

export async function downloadProduct(buildId: string, filename: string): Promise<void> {
  const headers: Record<string, string> = {};
  const token = sessionToken();
  if (token) headers['Authorization'] = `Bearer ${token}`;
  const response = await fetch(`${API}/builds/${encodeURIComponent(buildId)}/download/${encodeURIComponent(filename)}`, { headers });
  if (!response.ok) throw new ApiFailure(response.status, 'download_failed', `the download failed (${response.status})`, null);
  const url = URL.createObjectURL(await response.blob());
  try {
    const a = document.createElement('a');
    a.href = url;
    a.download = filename;
    a.click();
  } finally {
    // The click has started the download; the URL is not needed after this task.
    setTimeout(() => URL.revokeObjectURL(url), 0);
  }
}

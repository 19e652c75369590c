// A webhook, task action or upstream cache is refused when it is saved with a destination kiln
// would not connect to (outbound.allowedNetworks), so its owner learns it at once rather than
// from failed deliveries. Connecting checks again, after DNS resolution: a name may change.
import { ApiError } from '../../protocol/index.js';
import type { OutboundClient } from '../../storage/index.js';

export async function demandAllowedDestination(outbound: Pick<OutboundClient, 'refusalOf'>, field: string, url: string): Promise<void> {
  const why = await outbound.refusalOf(url);
  if (why !== null) throw new ApiError('destination_refused', `${field}: ${why}`);
}

// The small XML S3 speaks: documents built from plain objects, and the few elements read from
// request bodies. S3's documents carry its namespace; <Error> bodies do not.
export type XmlValue = string | number | boolean | XmlFields | XmlFields[];
export interface XmlFields { [element: string]: XmlValue | undefined }

const NAMESPACE = 'http://s3.amazonaws.com/doc/2006-03-01/';

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

export function unescapeXml(text: string): string {
  return text
    .replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'")
    .replace(/&#(x[0-9a-fA-F]+|[0-9]+);/g, (_, code: string) => String.fromCodePoint(code.startsWith('x') ? parseInt(code.slice(1), 16) : Number(code)))
    .replace(/&amp;/g, '&');
}

function render(fields: XmlFields): string {
  let out = '';
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) {
      out += `<${name}>${typeof item === 'object' ? render(item) : escapeXml(String(item))}</${name}>`;
    }
  }
  return out;
}

export function xmlDocument(root: string, fields: XmlFields, namespaced = true): string {
  const attributes = namespaced ? ` xmlns="${NAMESPACE}"` : '';
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root}${attributes}>${render(fields)}</${root}>`;
}

/** Every <name>…</name> in `xml`, inner text as written (elements S3 reads never nest the same name). */
export function xmlElements(xml: string, name: string): string[] {
  const pattern = new RegExp(`<${name}(?:\\s[^>]*)?>([\\s\\S]*?)</${name}>`, 'g');
  return [...xml.matchAll(pattern)].map((match) => match[1] ?? '');
}

/** The text of the one <name> inside `xml`, unescaped; undefined when absent or repeated. */
export function xmlText(xml: string, name: string): string | undefined {
  const found = xmlElements(xml, name);
  return found.length === 1 ? unescapeXml(found[0]!.trim()) : undefined;
}

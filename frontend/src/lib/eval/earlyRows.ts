// The evaluation page's early rows (scripts/earlyRows.client.js: the first builds drawn as plain DOM
// before the shell booted) are a stand-in until the page's own table is drawn: removed then, or when
// the page failed or another page shows, and never drawn after that.
export function dropEarlyRows(): void {
  (window as { kilnEarlyRowsDone?: boolean }).kilnEarlyRowsDone = true;
  document.getElementById('kiln-early-rows')?.remove();
}

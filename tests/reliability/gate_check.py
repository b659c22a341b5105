#!/usr/bin/env python3
"""Every public call that uses the driver's state takes a pass against
opends_driver_close (src/core/gate.h): its body starts with ODS_ENTER /
ODS_ENTER_SSIZE / ODS_ENTER_OR (or a macro defined as one of them), else
close may free what it uses. Calls that need no open driver are listed
below. Exit 0 when every OPENDS_API definition under src/ complies."""
import pathlib, re, sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.')
# need no driver state: errors, version, futures (user memory), the
# lifecycle itself, library listing and the safetensors parser
EXEMPT = {'opends_last_error_detail', 'opends_op_status_error', 'opends_err_name', 'opends_get_version',
          'opends_driver_open', 'opends_driver_open_with', 'opends_driver_close', 'opends_async_await',
          'opends_async_poll', 'opends_source_libraries', 'opends_safetensors_index',
          'opends_safetensors_index_free', 'opends_driver_backend'}
bad = []
n = 0
for f in sorted((root / 'src').rglob('*.c')):
    if 'dropin' in f.parts:
        continue
    text = f.read_text()
    gates = {'ODS_ENTER'} | set(re.findall(r'#define\s+(\w+)\([^)]*\)\s+ODS_ENTER', text))
    for m in re.finditer(r'^OPENDS_API\b[^(]*?\b(opends_\w+)\s*\(', text, re.M):
        name = m.group(1)
        body = text.index('{', m.end())
        # the first statements, past a few declarations (const char *fn = "...")
        end = text.find('\n}', body)  # the body ends at a brace in column 0
        head = ';'.join(text[body + 1:end].split(';')[:3])
        n += 1
        if name in EXEMPT:
            continue
        if not any(re.search(r'\b' + g + r'(_SSIZE|_OR)?\s*\(', head) for g in gates):
            bad.append(f'{f.relative_to(root)}: {name} does not start with ODS_ENTER')
for b in bad:
    print(b)
print(f'{n} public calls, {len(bad)} without a pass against close')
sys.exit(1 if bad else 0)

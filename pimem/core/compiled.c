/* Compiled fast paths: Pi's token estimates (estimateTokens, estimateContextTokens), the cut-point walks,
 * the walk of a path over a session's runs, the context's thinking level and model, the selection of the
 * context entries after a compaction, the projection of plain message entries and of context edits, the
 * file operations of tool calls.
 *
 * Each function decides only the plain shapes of JSON data (exact dicts, lists and strings; integers
 * below 10^15) and answers -1 (or None) for anything else, so that the pure-Python port (compaction.py,
 * session_manager.py), which stays the reference, decides every other case, errors included. Lengths are
 * JavaScript's: UTF-16 code units.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define CANNOT (-1) /* not a shape decided here: the Python port answers */
#define MAX_DEPTH 200
#define IMAGE_CHARS 4800 /* ESTIMATED_IMAGE_CHARS */

static PyObject *k_role, *k_content, *k_type, *k_text, *k_thinking, *k_arguments, *k_name, *k_command,
    *k_output, *k_summary, *k_message, *k_sections, *k_toolsAdded, *k_path, *k_id, *k_firstKeptEntryId, *k_targetId,
    *k_parentId, *k_thinkingLevel, *k_provider, *k_model, *k_modelId,
    *k_usage, *k_stopReason, *k_totalTokens, *k_input, *k_cacheRead, *k_cacheWrite;
static PyObject *s_assistant, *s_user, *s_toolResult, *s_custom, *s_bashExecution, *s_branchSummary,
    *s_compactionSummary, *s_system, *s_text, *s_thinking, *s_toolCall, *s_image, *s_message, *s_compaction,
    *s_custom_message, *s_branch_summary, *s_read, *s_edit, *s_write, *s_context_edit,
    *s_thinking_level_change, *s_model_change, *s_off, *s_aborted, *s_error;

static inline int
str_eq(PyObject *a, PyObject *b)
{
    if (a == b) {
        return 1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    if (n != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b)) {
        return 0;
    }
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
}

/* s.length: code points, plus one for each beyond the Basic Multilingual Plane (a surrogate pair). */
static Py_ssize_t
utf16_length(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_KIND(s) != PyUnicode_4BYTE_KIND) {
        return n;
    }
    const Py_UCS4 *data = PyUnicode_4BYTE_DATA(s);
    Py_ssize_t extra = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        extra += data[i] > 0xFFFF;
    }
    return n + extra;
}

/* The characters JSON.stringify adds for a code point below 256: \b \t \n \f \r \" \\ take two
 * characters, the other controls \u00XX six. */
static unsigned char ESCAPE_EXTRA[256];

static void
init_escape_extra(void)
{
    for (int c = 0; c < 0x20; c++) {
        ESCAPE_EXTRA[c] = (c == 8 || c == 9 || c == 10 || c == 12 || c == 13) ? 1 : 5;
    }
    ESCAPE_EXTRA['"'] = 1;
    ESCAPE_EXTRA['\\'] = 1;
}

/* JSON.stringify(s).length; CANNOT for a string holding a surrogate code point. */
static Py_ssize_t
json_string_length(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    Py_ssize_t total = 2 + n;
    int kind = PyUnicode_KIND(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *data = PyUnicode_1BYTE_DATA(s);
        Py_ssize_t i = 0;
        /* eight characters at a time: a word without a control, quote or backslash adds nothing */
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            memcpy(&w, data + i, 8);
            uint64_t quote = w ^ (ones * '"'), slash = w ^ (ones * '\\');
            uint64_t special = ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) | ((slash - ones) & ~slash);
            if (special & highs) {
                for (int j = 0; j < 8; j++) {
                    total += ESCAPE_EXTRA[data[i + j]];
                }
            }
        }
        for (; i < n; i++) {
            total += ESCAPE_EXTRA[data[i]];
        }
        return total;
    }
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *data = PyUnicode_2BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS2 c = data[i];
            if (c < 256) {
                total += ESCAPE_EXTRA[c];
            }
            else if (c >= 0xD800 && c <= 0xDFFF) {
                return CANNOT;
            }
        }
        return total;
    }
    const Py_UCS4 *data = PyUnicode_4BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = data[i];
        if (c < 256) {
            total += ESCAPE_EXTRA[c];
        }
        else if (c >= 0xD800 && c <= 0xDFFF) {
            return CANNOT;
        }
        else if (c > 0xFFFF) {
            total += 1;
        }
    }
    return total;
}

/* JSON.stringify(v).length for JSON data, or CANNOT. */
static Py_ssize_t
json_length(PyObject *v, int depth)
{
    if (PyUnicode_CheckExact(v)) {
        return json_string_length(v);
    }
    if (v == Py_None || v == Py_True) {
        return 4;
    }
    if (v == Py_False) {
        return 5;
    }
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || x <= -1000000000000000LL || x >= 1000000000000000LL) {
            return CANNOT; /* beyond 15 digits JavaScript's digits may differ */
        }
        Py_ssize_t digits = x < 0 ? 2 : 1;
        unsigned long long u = x < 0 ? (unsigned long long)(-x) : (unsigned long long)x;
        while (u >= 10) {
            u /= 10;
            digits++;
        }
        return digits;
    }
    if (depth >= MAX_DEPTH) {
        return CANNOT;
    }
    if (PyList_CheckExact(v)) {
        Py_ssize_t n = PyList_GET_SIZE(v);
        Py_ssize_t total = n > 0 ? 1 + n : 2; /* brackets and n - 1 commas */
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t item = json_length(PyList_GET_ITEM(v, i), depth + 1);
            if (item < 0) {
                return CANNOT;
            }
            total += item;
        }
        return total;
    }
    if (PyDict_CheckExact(v)) {
        /* the length does not depend on the order JavaScript lists the keys in */
        Py_ssize_t pos = 0, count = 0, total = 2;
        PyObject *key, *value;
        while (PyDict_Next(v, &pos, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) {
                return CANNOT;
            }
            Py_ssize_t k = json_string_length(key);
            Py_ssize_t item = k < 0 ? CANNOT : json_length(value, depth + 1);
            if (item < 0) {
                return CANNOT;
            }
            total += k + 1 + item;
            count++;
        }
        return count > 0 ? total + count - 1 : total;
    }
    return CANNOT;
}

/* d[key] where d holds it, else NULL (no error is left set). */
static inline PyObject *
get(PyObject *d, PyObject *key)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred()) {
        PyErr_Clear();
    }
    return v;
}

static inline Py_ssize_t
string_chars(PyObject *v)
{
    return (v != NULL && PyUnicode_CheckExact(v)) ? utf16_length(v) : CANNOT;
}

/* A content block's type: 1 with *btype set (a string), 0 for a block without one (skipped), CANNOT for a
 * block that is not a dict or a type that is not a string. */
static int
block_type(PyObject *block, PyObject **btype)
{
    if (!PyDict_CheckExact(block)) {
        return CANNOT;
    }
    *btype = get(block, k_type);
    if (*btype == NULL) {
        return 0;
    }
    return PyUnicode_CheckExact(*btype) ? 1 : CANNOT;
}

static Py_ssize_t
assistant_chars(PyObject *content)
{
    if (content == NULL || !PyList_CheckExact(content)) {
        return CANNOT;
    }
    Py_ssize_t chars = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
        PyObject *block = PyList_GET_ITEM(content, i), *btype;
        int typed = block_type(block, &btype);
        if (typed < 0) {
            return CANNOT;
        }
        if (typed == 0) {
            continue;
        }
        Py_ssize_t add;
        if (str_eq(btype, s_text)) {
            add = string_chars(get(block, k_text));
        }
        else if (str_eq(btype, s_thinking)) {
            add = string_chars(get(block, k_thinking));
        }
        else if (str_eq(btype, s_toolCall)) {
            PyObject *arguments = get(block, k_arguments);
            Py_ssize_t name = string_chars(get(block, k_name));
            add = (arguments == NULL || name < 0) ? CANNOT : json_length(arguments, 0);
            if (add >= 0) {
                add += name;
            }
        }
        else {
            continue;
        }
        if (add < 0) {
            return CANNOT;
        }
        chars += add;
    }
    return chars;
}

static Py_ssize_t
text_and_image_chars(PyObject *content)
{
    if (content == NULL) {
        return CANNOT;
    }
    if (PyUnicode_CheckExact(content)) {
        return utf16_length(content);
    }
    if (!PyList_CheckExact(content)) {
        return CANNOT;
    }
    Py_ssize_t chars = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
        PyObject *block = PyList_GET_ITEM(content, i), *btype;
        int typed = block_type(block, &btype);
        if (typed < 0) {
            return CANNOT;
        }
        if (typed == 0) {
            continue;
        }
        if (str_eq(btype, s_text)) {
            Py_ssize_t add = string_chars(get(block, k_text));
            if (add < 0) {
                return CANNOT;
            }
            chars += add;
        }
        else if (str_eq(btype, s_image)) {
            chars += IMAGE_CHARS;
        }
    }
    return chars;
}

/* A system message: its content, its truthy sections (an object of strings) and JSON.stringify of its
 * added tools (a list), or CANNOT. */
static Py_ssize_t
system_chars(PyObject *m)
{
    Py_ssize_t chars = text_and_image_chars(get(m, k_content));
    if (chars < 0) {
        return CANNOT;
    }
    PyObject *sections = get(m, k_sections);
    if (sections != NULL && sections != Py_None && sections != Py_False) {
        if (!PyDict_CheckExact(sections)) {
            return CANNOT;
        }
        Py_ssize_t pos = 0;
        PyObject *key, *section;
        while (PyDict_Next(sections, &pos, &key, &section)) {
            if (section == Py_None || section == Py_False) {
                continue;
            }
            if (!PyUnicode_CheckExact(section)) {
                return CANNOT;
            }
            chars += utf16_length(section);
        }
    }
    PyObject *tools = get(m, k_toolsAdded);
    if (tools != NULL && tools != Py_None && tools != Py_False) {
        Py_ssize_t n = PyList_CheckExact(tools) ? json_length(tools, 0) : CANNOT;
        if (n < 0) {
            return CANNOT;
        }
        chars += n;
    }
    return chars;
}

/* estimate_chars(message), or CANNOT. */
static Py_ssize_t
message_chars(PyObject *m)
{
    if (!PyDict_CheckExact(m)) {
        return CANNOT;
    }
    PyObject *role = get(m, k_role);
    if (role == NULL || !PyUnicode_CheckExact(role)) {
        return CANNOT;
    }
    if (str_eq(role, s_assistant)) {
        return assistant_chars(get(m, k_content));
    }
    if (str_eq(role, s_toolResult) || str_eq(role, s_user) || str_eq(role, s_custom)) {
        return text_and_image_chars(get(m, k_content));
    }
    if (str_eq(role, s_bashExecution)) {
        Py_ssize_t command = string_chars(get(m, k_command));
        Py_ssize_t output = string_chars(get(m, k_output));
        return (command < 0 || output < 0) ? CANNOT : command + output;
    }
    if (str_eq(role, s_branchSummary) || str_eq(role, s_compactionSummary)) {
        return string_chars(get(m, k_summary));
    }
    if (str_eq(role, s_system)) {
        return system_chars(m);
    }
    return 0;
}

static PyObject *
chars(PyObject *module, PyObject *message)
{
    return PyLong_FromSsize_t(message_chars(message));
}

static PyObject *
tokens(PyObject *module, PyObject *message)
{
    Py_ssize_t n = message_chars(message);
    return PyLong_FromSsize_t(n < 0 ? CANNOT : (n + 3) / 4);
}

static PyObject *
stringify_length(PyObject *module, PyObject *value)
{
    return PyLong_FromSsize_t(json_length(value, 0));
}

static PyObject *
message_entries_checked(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "message_entries_checked(entries, start, end)");
        return NULL;
    }
    PyObject *entries = args[0];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = start == -1 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!PyList_CheckExact(entries) || start < 0 || end < start || end > PyList_GET_SIZE(entries)) {
        Py_RETURN_NONE;
    }
    for (Py_ssize_t i = start; i < end; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        if (!PyDict_CheckExact(entry)) {
            Py_RETURN_NONE;
        }
        PyObject *etype = get(entry, k_type);
        if (etype == NULL) {
            Py_RETURN_FALSE;
        }
        if (!PyUnicode_CheckExact(etype)) {
            Py_RETURN_NONE;
        }
        if (str_eq(etype, s_message)) {
            PyObject *message = get(entry, k_message);
            if (message == NULL || !PyDict_CheckExact(message)) {
                Py_RETURN_FALSE;
            }
        }
    }
    Py_RETURN_TRUE;
}

/* Whether session_entry_to_context_messages(entry) is [] by the entry's own type: none, or a string that
 * is not one of the four types bringing messages. */
static int
brings_nothing(PyObject *entry)
{
    PyObject *etype = get(entry, k_type);
    if (etype == NULL) {
        return 1;
    }
    return PyUnicode_CheckExact(etype) && !str_eq(etype, s_message) && !str_eq(etype, s_custom_message)
           && !str_eq(etype, s_branch_summary) && !str_eq(etype, s_compaction);
}

/* The tokens of a plain message entry (a dict message with content), 0 for an entry whose own type brings
 * no messages, or CANNOT for any other entry. */
static long long
entry_tokens(PyObject *entry)
{
    if (!PyDict_CheckExact(entry)) {
        return CANNOT;
    }
    PyObject *etype = get(entry, k_type);
    if (etype == NULL) {
        return 0;
    }
    if (!PyUnicode_CheckExact(etype)) {
        return CANNOT;
    }
    if (!str_eq(etype, s_message)) { /* brings_nothing by its type, or one that brings messages */
        return str_eq(etype, s_custom_message) || str_eq(etype, s_branch_summary) || str_eq(etype, s_compaction)
                   ? CANNOT
                   : 0;
    }
    PyObject *message = get(entry, k_message);
    if (message == NULL || !PyDict_CheckExact(message)) {
        return CANNOT;
    }
    PyObject *content = get(message, k_content);
    if (content == NULL || content == Py_None) {
        return CANNOT;
    }
    Py_ssize_t n = message_chars(message);
    return n < 0 ? CANNOT : (n + 3) / 4;
}

/* The tokens of a list of plain messages (a projected entry's), or CANNOT. */
static long long
messages_tokens(PyObject *messages)
{
    if (!PyList_CheckExact(messages)) {
        return CANNOT;
    }
    long long tokens = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(messages); k++) {
        Py_ssize_t n = message_chars(PyList_GET_ITEM(messages, k));
        if (n < 0) {
            return CANNOT;
        }
        tokens += (n + 3) / 4;
    }
    return tokens;
}

/* The walk back of a cut-point search: adds up tokens_of(items[i]) from end - 1 down to start and stops
 * at the first item where the total reaches keep (hit), at the first item tokens_of does not decide (the
 * Python loop takes that one and may call again), or after start. Returns (index, total, hit); None
 * where items is not a list or keep not a number. */
static PyObject *
walk_back(PyObject *const *args, Py_ssize_t nargs, long long (*tokens_of)(PyObject *))
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "expected (items, start, end, keep, total)");
        return NULL;
    }
    PyObject *items = args[0], *keep_obj = args[3];
    if (!PyList_CheckExact(items) || !(PyLong_CheckExact(keep_obj) || PyFloat_CheckExact(keep_obj))
        || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2]) || !PyLong_CheckExact(args[4])) {
        Py_RETURN_NONE;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = start == -1 && PyErr_Occurred() ? -1 : PyLong_AsSsize_t(args[2]);
    long long total = PyErr_Occurred() ? 0 : PyLong_AsLongLong(args[4]);
    double keep = PyErr_Occurred() ? 0.0 : PyFloat_AsDouble(keep_obj);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (start < 0 || end > PyList_GET_SIZE(items) || total < 0 || total > (1LL << 52)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t i = end - 1;
    int hit = 0;
    for (; i >= start; i--) {
        long long tokens = tokens_of(PyList_GET_ITEM(items, i));
        if (tokens < 0) {
            break;
        }
        if (tokens == 0) {
            continue;
        }
        total += tokens;
        if ((double)total >= keep) {
            hit = 1;
            break;
        }
    }
    return Py_BuildValue("nLO", i, total, hit ? Py_True : Py_False);
}

static PyObject *
tokens_back(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return walk_back(args, nargs, entry_tokens);
}

static PyObject *
parts_tokens_back(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return walk_back(args, nargs, messages_tokens);
}

/* project_parts without context edits: (per-entry message lists, all messages). A message entry whose
 * message has content brings that message; a compaction after the first entry, and an entry of a type
 * that brings no messages, bring nothing; every other entry brings to_msgs(entry), which must return a list. None where an entry is not a dict, a
 * message entry has no dict message, or to_msgs returns something else; with_lists False leaves the
 * per-entry lists out (None in their place). */
static PyObject *
project_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "project_plain(context_entries, types, to_msgs, with_lists)");
        return NULL;
    }
    PyObject *entries = args[0], *types = args[1], *to_msgs = args[2];
    int with_lists = PyObject_IsTrue(args[3]);
    if (with_lists < 0) {
        return NULL;
    }
    if (!PyList_CheckExact(entries) || !PyList_CheckExact(types)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(entries) < PyList_GET_SIZE(types) ? PyList_GET_SIZE(entries)
                                                                      : PyList_GET_SIZE(types);
    PyObject *per_entry = with_lists ? PyList_New(n) : NULL;
    PyObject *messages = PyList_New(0);
    if (messages == NULL || (with_lists && per_entry == NULL)) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i), *etype = PyList_GET_ITEM(types, i);
        PyObject *msgs = NULL;
        if (!PyDict_CheckExact(entry)) {
            goto cannot;
        }
        int is_message = PyUnicode_CheckExact(etype) && str_eq(etype, s_message);
        if (is_message) {
            PyObject *message = get(entry, k_message);
            if (message == NULL || !PyDict_CheckExact(message)) {
                goto cannot;
            }
            PyObject *content = get(message, k_content);
            if (content != NULL && content != Py_None) {
                if (PyList_Append(messages, message) < 0) {
                    goto error;
                }
                if (with_lists) {
                    if ((msgs = PyList_New(1)) == NULL) {
                        goto error;
                    }
                    Py_INCREF(message);
                    PyList_SET_ITEM(msgs, 0, message);
                    PyList_SET_ITEM(per_entry, i, msgs);
                }
                continue;
            }
        }
        if ((i > 0 && PyUnicode_CheckExact(etype) && str_eq(etype, s_compaction)) || brings_nothing(entry)) {
            msgs = PyList_New(0);
        }
        else {
            msgs = PyObject_CallOneArg(to_msgs, entry);
            if (msgs != NULL && !PyList_CheckExact(msgs)) {
                Py_DECREF(msgs);
                goto cannot;
            }
        }
        if (msgs == NULL) {
            goto error;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(msgs); k++) {
            if (PyList_Append(messages, PyList_GET_ITEM(msgs, k)) < 0) {
                Py_DECREF(msgs);
                goto error;
            }
        }
        if (with_lists) {
            PyList_SET_ITEM(per_entry, i, msgs);
        }
        else {
            Py_DECREF(msgs);
        }
    }
    PyObject *result = Py_BuildValue("(OO)", with_lists ? per_entry : Py_None, messages);
    Py_XDECREF(per_entry);
    Py_DECREF(messages);
    return result;
cannot:
    Py_XDECREF(per_entry);
    Py_XDECREF(messages);
    Py_RETURN_NONE;
error:
    Py_XDECREF(per_entry);
    Py_XDECREF(messages);
    return NULL;
}

/* Whether v is JSON data of another kind than a string (it compares unequal to every string). */
static inline int
other_json(PyObject *v)
{
    return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyList_CheckExact(v)
           || PyDict_CheckExact(v);
}

/* add_file_ops: the paths of the read, write and edit tool calls of assistant messages, added to the three
 * sets. Returns True; None, with the sets untouched, where a value is of a kind only the Python loop
 * decides (a subclass of list, dict or str, an object that is not JSON data). */
static PyObject *
add_file_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "add_file_ops(messages, read, written, edited)");
        return NULL;
    }
    PyObject *messages = args[0];
    if (!PyList_CheckExact(messages) || !PySet_CheckExact(args[1]) || !PySet_CheckExact(args[2])
        || !PySet_CheckExact(args[3])) {
        Py_RETURN_NONE;
    }
    PyObject *found = PyList_New(0); /* (set, path) pairs, added once every value is decided */
    if (found == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(messages); i++) {
        PyObject *message = PyList_GET_ITEM(messages, i);
        if (!PyDict_CheckExact(message)) {
            goto cannot;
        }
        PyObject *role = get(message, k_role);
        if (role == NULL || (!PyUnicode_CheckExact(role) && other_json(role))) {
            continue;
        }
        if (!PyUnicode_CheckExact(role)) {
            goto cannot;
        }
        if (!str_eq(role, s_assistant)) {
            continue;
        }
        PyObject *content = get(message, k_content);
        if (content == NULL || !PyList_Check(content)) {
            continue;
        }
        if (!PyList_CheckExact(content)) {
            goto cannot;
        }
        for (Py_ssize_t b = 0; b < PyList_GET_SIZE(content); b++) {
            PyObject *block = PyList_GET_ITEM(content, b);
            if (!PyDict_Check(block)) {
                continue;
            }
            if (!PyDict_CheckExact(block)) {
                goto cannot;
            }
            PyObject *btype = get(block, k_type), *name = get(block, k_name);
            if (btype == NULL || !(PyUnicode_CheckExact(btype) ? str_eq(btype, s_toolCall) : !other_json(btype))) {
                continue;
            }
            if (!PyUnicode_CheckExact(btype)) {
                goto cannot;
            }
            if (name == NULL || (!PyUnicode_CheckExact(name) && other_json(name))) {
                continue;
            }
            if (!PyUnicode_CheckExact(name)) {
                goto cannot;
            }
            PyObject *target = str_eq(name, s_read) ? args[1] : str_eq(name, s_edit) ? args[3]
                                                               : str_eq(name, s_write) ? args[2] : NULL;
            if (target == NULL) {
                continue;
            }
            PyObject *arguments = get(block, k_arguments);
            if (arguments == NULL || !PyDict_Check(arguments)) {
                continue;
            }
            if (!PyDict_CheckExact(arguments)) {
                goto cannot;
            }
            PyObject *path = get(arguments, k_path);
            if (path == NULL || !PyUnicode_Check(path) || PyUnicode_GET_LENGTH(path) == 0) {
                continue;
            }
            if (!PyUnicode_CheckExact(path)) {
                goto cannot;
            }
            PyObject *pair = PyTuple_Pack(2, target, path);
            if (pair == NULL || PyList_Append(found, pair) < 0) {
                Py_XDECREF(pair);
                Py_DECREF(found);
                return NULL;
            }
            Py_DECREF(pair);
        }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(found); i++) {
        PyObject *pair = PyList_GET_ITEM(found, i);
        if (PySet_Add(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0) {
            Py_DECREF(found);
            return NULL;
        }
    }
    Py_DECREF(found);
    Py_RETURN_TRUE;
cannot:
    Py_DECREF(found);
    Py_RETURN_NONE;
}

/* a == s as Python compares a JSON value a with an exact str s: 1 or 0; CANNOT where a is of a kind only
 * Python decides (a subclass of str, an object that is not JSON data). */
static inline int
equals_str(PyObject *a, PyObject *s)
{
    if (PyUnicode_CheckExact(a)) {
        return str_eq(a, s);
    }
    return other_json(a) ? 0 : CANNOT;
}

/* context_entries_and_types on a walked path with a compaction: (the latest compaction, the entries from
 * its first kept entry on that are not system messages, everything after it; their types). The first kept
 * entry is searched back from the compaction; None where its id is not a non-empty string, or an entry
 * looked at is not a plain dict (a message entry: with a dict message), or a value compared is of another
 * kind than JSON data and exact strings. */
static PyObject *
select_context(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "select_context(path, types)");
        return NULL;
    }
    PyObject *path = args[0], *types = args[1];
    if (!PyList_CheckExact(path) || !PyList_CheckExact(types) || PyList_GET_SIZE(path) != PyList_GET_SIZE(types)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(path), at = n - 1;
    for (; at >= 0; at--) {
        int found = equals_str(PyList_GET_ITEM(types, at), s_compaction);
        if (found == CANNOT) {
            Py_RETURN_NONE;
        }
        if (found) {
            break;
        }
    }
    if (at < 0) {
        Py_RETURN_NONE;
    }
    PyObject *compaction = PyList_GET_ITEM(path, at);
    if (!PyDict_CheckExact(compaction)) {
        Py_RETURN_NONE;
    }
    PyObject *first_kept = get(compaction, k_firstKeptEntryId);
    if (first_kept == NULL || !PyUnicode_CheckExact(first_kept) || PyUnicode_GET_LENGTH(first_kept) == 0) {
        Py_RETURN_NONE;
    }
    Py_ssize_t start = at;
    for (Py_ssize_t i = at - 1; i >= 0; i--) {
        PyObject *entry = PyList_GET_ITEM(path, i);
        if (!PyDict_CheckExact(entry)) {
            Py_RETURN_NONE;
        }
        PyObject *id = get(entry, k_id);
        int same = id == NULL ? 0 : equals_str(id, first_kept);
        if (same == CANNOT) {
            Py_RETURN_NONE;
        }
        if (same) {
            start = i;
            break;
        }
    }
    PyObject *entries = PyList_New(0), *entry_types = PyList_New(0);
    if (entries == NULL || entry_types == NULL || PyList_Append(entries, compaction) < 0
        || PyList_Append(entry_types, PyList_GET_ITEM(types, at)) < 0) {
        goto error;
    }
    for (Py_ssize_t i = start; i < at; i++) {
        PyObject *entry = PyList_GET_ITEM(path, i), *etype = PyList_GET_ITEM(types, i);
        int is_message = equals_str(etype, s_message);
        if (is_message == CANNOT) {
            goto cannot;
        }
        if (is_message) {
            PyObject *message = get(entry, k_message);
            if (message == NULL || !PyDict_CheckExact(message)) {
                goto cannot;
            }
            PyObject *role = get(message, k_role);
            int system = role == NULL ? 0 : equals_str(role, s_system);
            if (system == CANNOT) {
                goto cannot;
            }
            if (system) {
                continue;
            }
        }
        if (PyList_Append(entries, entry) < 0 || PyList_Append(entry_types, etype) < 0) {
            goto error;
        }
    }
    for (Py_ssize_t i = at + 1; i < n; i++) {
        if (PyList_Append(entries, PyList_GET_ITEM(path, i)) < 0
            || PyList_Append(entry_types, PyList_GET_ITEM(types, i)) < 0) {
            goto error;
        }
    }
    PyObject *result = PyTuple_Pack(2, entries, entry_types);
    Py_DECREF(entries);
    Py_DECREF(entry_types);
    return result;
cannot:
    Py_DECREF(entries);
    Py_DECREF(entry_types);
    Py_RETURN_NONE;
error:
    Py_XDECREF(entries);
    Py_XDECREF(entry_types);
    return NULL;
}

/* project_parts with context edits: (per-entry message lists or None, messages). The edits are the
 * context_edit entries by targetId, the last one winning. A compaction after the first entry brings
 * nothing; an entry without an edit brings its message where it is a message entry whose message has
 * content, nothing where its own type brings none; every other entry brings project_entry(entry, edit or
 * None), which must return a list. None where an entry is not a dict, a targetId not a string, an id a
 * value Python would not look up as JSON data, a message entry has no dict message, or project_entry
 * returns something else; with_lists False leaves the per-entry lists out. */
static PyObject *
project_edited(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "project_edited(context_entries, types, project_entry, with_lists)");
        return NULL;
    }
    PyObject *entries = args[0], *types = args[1], *project_entry = args[2];
    int with_lists = PyObject_IsTrue(args[3]);
    if (with_lists < 0) {
        return NULL;
    }
    if (!PyList_CheckExact(entries) || !PyList_CheckExact(types) || PyList_GET_SIZE(entries) != PyList_GET_SIZE(types)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(entries);
    PyObject *per_entry = NULL, *messages = NULL, *edits = PyDict_New();
    if (edits == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        int is_edit = equals_str(PyList_GET_ITEM(types, i), s_context_edit);
        if (is_edit == CANNOT || !PyDict_CheckExact(entry)) {
            goto cannot;
        }
        if (is_edit) {
            PyObject *target = get(entry, k_targetId);
            if (target == NULL || !PyUnicode_CheckExact(target)) {
                goto cannot;
            }
            if (PyDict_SetItem(edits, target, entry) < 0) {
                goto error;
            }
        }
    }
    per_entry = with_lists ? PyList_New(n) : NULL;
    messages = PyList_New(0);
    if (messages == NULL || (with_lists && per_entry == NULL)) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i), *etype = PyList_GET_ITEM(types, i);
        PyObject *msgs = NULL, *edit = NULL;
        int is_compaction = equals_str(etype, s_compaction), is_message = equals_str(etype, s_message);
        if (is_compaction == CANNOT || is_message == CANNOT) {
            goto cannot;
        }
        if (i > 0 && is_compaction) {
            if ((msgs = PyList_New(0)) == NULL) {
                goto error;
            }
            goto add;
        }
        PyObject *id = get(entry, k_id);
        if (id != NULL) {
            if (PyUnicode_CheckExact(id)) {
                edit = get(edits, id);
            }
            else if (!other_json(id) || PyList_CheckExact(id) || PyDict_CheckExact(id)) {
                goto cannot; /* a subclass of str, an object, or a key Python cannot look up */
            }
        }
        if (edit == NULL && is_message) {
            PyObject *message = get(entry, k_message);
            if (message == NULL || !PyDict_CheckExact(message)) {
                goto cannot;
            }
            PyObject *content = get(message, k_content);
            if (content != NULL && content != Py_None) {
                if (PyList_Append(messages, message) < 0) {
                    goto error;
                }
                if (with_lists) {
                    if ((msgs = PyList_New(1)) == NULL) {
                        goto error;
                    }
                    Py_INCREF(message);
                    PyList_SET_ITEM(msgs, 0, message);
                    PyList_SET_ITEM(per_entry, i, msgs);
                }
                continue;
            }
        }
        if (edit == NULL && brings_nothing(entry)) {
            msgs = PyList_New(0);
        }
        else {
            msgs = PyObject_CallFunctionObjArgs(project_entry, entry, edit == NULL ? Py_None : edit, NULL);
            if (msgs != NULL && !PyList_CheckExact(msgs)) {
                Py_DECREF(msgs);
                goto cannot;
            }
        }
        if (msgs == NULL) {
            goto error;
        }
    add:
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(msgs); k++) {
            if (PyList_Append(messages, PyList_GET_ITEM(msgs, k)) < 0) {
                Py_DECREF(msgs);
                goto error;
            }
        }
        if (with_lists) {
            PyList_SET_ITEM(per_entry, i, msgs);
        }
        else {
            Py_DECREF(msgs);
        }
    }
    Py_DECREF(edits);
    PyObject *result = Py_BuildValue("(OO)", with_lists ? per_entry : Py_None, messages);
    Py_XDECREF(per_entry);
    Py_DECREF(messages);
    return result;
cannot:
    Py_DECREF(edits);
    Py_XDECREF(per_entry);
    Py_XDECREF(messages);
    Py_RETURN_NONE;
error:
    Py_DECREF(edits);
    Py_XDECREF(per_entry);
    Py_XDECREF(messages);
    return NULL;
}

/* _run_path's walk from the entry at position at: (the path, its entry types) joined from the runs, each a
 * slice of the entries ending where the walk enters it and starting at run_start of that position; the
 * walk goes on at the position of the parentId of a run's first entry. None where the walk is longer
 * than the entries (a parentId cycle), or a value is not of the plain kinds (exact lists, dicts, strings
 * and integers in range). */
static PyObject *
run_path(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "run_path(entries, run_start, positions, types, at)");
        return NULL;
    }
    PyObject *entries = args[0], *run_start = args[1], *positions = args[2], *types = args[3];
    if (!PyList_CheckExact(entries) || !PyList_CheckExact(run_start) || !PyDict_CheckExact(positions)
        || !PyList_CheckExact(types) || !PyLong_CheckExact(args[4])) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(entries);
    if (PyList_GET_SIZE(run_start) != n || PyList_GET_SIZE(types) != n) {
        Py_RETURN_NONE;
    }
    Py_ssize_t at = PyLong_AsSsize_t(args[4]);
    if (at == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t small[64], *pieces = small, cap = 64, count = 0, total = 0;
    PyObject *result = NULL;
    for (;;) {
        if (at < 0 || at >= n) {
            goto done;
        }
        PyObject *first = PyList_GET_ITEM(run_start, at);
        Py_ssize_t start = PyLong_CheckExact(first) ? PyLong_AsSsize_t(first) : -1;
        if (start < 0 || start > at) {
            PyErr_Clear();
            goto done;
        }
        if (count + 2 > cap) {
            Py_ssize_t *grown = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)cap * 2);
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            memcpy(grown, pieces, sizeof(Py_ssize_t) * (size_t)count);
            if (pieces != small) {
                PyMem_Free(pieces);
            }
            pieces = grown;
            cap *= 2;
        }
        pieces[count++] = start;
        pieces[count++] = at + 1;
        total += at + 1 - start;
        if (total > n) {
            goto done; /* a parentId cycle: the walk that stops at it */
        }
        PyObject *entry = PyList_GET_ITEM(entries, start);
        if (!PyDict_CheckExact(entry)) {
            goto done;
        }
        PyObject *parent = get(entry, k_parentId);
        if (parent == NULL || (!PyUnicode_Check(parent) && other_json(parent))) {
            break;
        }
        if (!PyUnicode_CheckExact(parent)) {
            goto done;
        }
        if (PyUnicode_GET_LENGTH(parent) == 0) {
            break;
        }
        PyObject *next = get(positions, parent);
        if (next == NULL) {
            break;
        }
        if (!PyLong_CheckExact(next)) {
            goto done;
        }
        at = PyLong_AsSsize_t(next);
        if (at == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
    }
    PyObject *path = PyList_New(total), *path_types = PyList_New(total);
    if (path == NULL || path_types == NULL) {
        Py_XDECREF(path);
        Py_XDECREF(path_types);
        goto done;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t p = count - 2; p >= 0; p -= 2) {
        for (Py_ssize_t i = pieces[p]; i < pieces[p + 1]; i++, k++) {
            PyObject *e = PyList_GET_ITEM(entries, i), *t = PyList_GET_ITEM(types, i);
            Py_INCREF(e);
            PyList_SET_ITEM(path, k, e);
            Py_INCREF(t);
            PyList_SET_ITEM(path_types, k, t);
        }
    }
    result = PyTuple_Pack(2, path, path_types);
    Py_DECREF(path);
    Py_DECREF(path_types);
done:
    if (pieces != small) {
        PyMem_Free(pieces);
    }
    if (result == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return result;
}

/* context_settings_of after its check of the messages: (the thinkingLevel of the last thinking-level
 * change, else "off"; the model of the last assistant message or model change, else None). None where an
 * entry looked at is not a dict (a message entry: with a dict message) or a type or role compared is of
 * another kind than JSON data and exact strings. */
static PyObject *
context_settings(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "context_settings(path, types)");
        return NULL;
    }
    PyObject *path = args[0], *types = args[1];
    if (!PyList_CheckExact(path) || !PyList_CheckExact(types) || PyList_GET_SIZE(path) != PyList_GET_SIZE(types)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(types);
    PyObject *thinking_level = s_off, *source = NULL, *key = NULL;
    for (Py_ssize_t i = n - 1; i >= 0; i--) {
        int found = equals_str(PyList_GET_ITEM(types, i), s_thinking_level_change);
        if (found == CANNOT) {
            Py_RETURN_NONE;
        }
        if (found) {
            PyObject *entry = PyList_GET_ITEM(path, i);
            if (!PyDict_CheckExact(entry)) {
                Py_RETURN_NONE;
            }
            thinking_level = get(entry, k_thinkingLevel);
            if (thinking_level == NULL) {
                thinking_level = Py_None;
            }
            break;
        }
    }
    for (Py_ssize_t i = n - 1; i >= 0 && source == NULL; i--) {
        PyObject *etype = PyList_GET_ITEM(types, i), *entry = PyList_GET_ITEM(path, i);
        int is_message = equals_str(etype, s_message), is_model = equals_str(etype, s_model_change);
        if (is_message == CANNOT || is_model == CANNOT) {
            Py_RETURN_NONE;
        }
        if (!is_message && !is_model) {
            continue;
        }
        if (!PyDict_CheckExact(entry)) {
            Py_RETURN_NONE;
        }
        if (is_model) {
            source = entry;
            key = k_modelId;
            break;
        }
        PyObject *message = get(entry, k_message);
        if (message == NULL || !PyDict_CheckExact(message)) {
            Py_RETURN_NONE;
        }
        PyObject *role = get(message, k_role);
        int assistant = role == NULL ? 0 : equals_str(role, s_assistant);
        if (assistant == CANNOT) {
            Py_RETURN_NONE;
        }
        if (assistant) {
            source = message;
            key = k_model;
        }
    }
    if (source == NULL) {
        return PyTuple_Pack(2, thinking_level, Py_None);
    }
    PyObject *model = PyDict_New(), *provider = get(source, k_provider), *model_id = get(source, key);
    if (model == NULL || (provider != NULL && PyDict_SetItem(model, k_provider, provider) < 0)
        || (model_id != NULL && PyDict_SetItem(model, k_modelId, model_id) < 0)) {
        Py_XDECREF(model);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, thinking_level, model);
    Py_DECREF(model);
    return result;
}

/* An exact integer within 10^15 in *out: 1, else 0. */
static inline int
small_int(PyObject *v, long long *out)
{
    if (v == NULL || !PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()) || x > 999999999999999LL || x < -999999999999999LL) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* calculate_context_tokens(usage) > 0 for an assistant message's usage: 1 with the tokens in *out (a new
 * reference), 0 where the usage is not valid, CANNOT where the Python port decides (numbers that are not
 * exact integers within 10^15, a usage that is not a dict, null or false). */
static int
usage_tokens(PyObject *message, PyObject **out)
{
    PyObject *usage = get(message, k_usage), *stop = get(message, k_stopReason);
    if (usage == NULL) {
        return 0;
    }
    if (stop != NULL) {
        int aborted = equals_str(stop, s_aborted), error = equals_str(stop, s_error);
        if (aborted == CANNOT || error == CANNOT) {
            return CANNOT;
        }
        if (aborted || error) {
            return 0;
        }
    }
    if (usage == Py_None || usage == Py_False) {
        return 0;
    }
    if (!PyDict_CheckExact(usage)) {
        return CANNOT;
    }
    PyObject *total = get(usage, k_totalTokens);
    long long t = 0;
    if (total != NULL && total != Py_None) {
        if (!small_int(total, &t)) {
            return CANNOT;
        }
        if (t != 0) {
            if (t <= 0) {
                return 0;
            }
            Py_INCREF(total);
            *out = total;
            return 1;
        }
    }
    PyObject *parts[4] = {get(usage, k_input), get(usage, k_output), get(usage, k_cacheRead), get(usage, k_cacheWrite)};
    long long sum = 0;
    for (int k = 0; k < 4; k++) {
        long long p;
        if (!small_int(parts[k], &p)) {
            return CANNOT;
        }
        sum += p;
    }
    if (sum <= 0) {
        return 0;
    }
    return (*out = PyLong_FromLongLong(sum)) == NULL ? -2 : 1;
}

/* estimate_context_tokens without a cache: (tokens, usage tokens, trailing tokens, index of the last valid
 * usage or None). None where a message looked at is not plain (see usage_tokens and message_chars). */
static PyObject *
context_tokens(PyObject *module, PyObject *messages)
{
    if (!PyList_CheckExact(messages)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(messages), index = n - 1;
    PyObject *usage = NULL;
    for (; index >= 0; index--) {
        PyObject *m = PyList_GET_ITEM(messages, index);
        if (!PyDict_CheckExact(m)) {
            Py_RETURN_NONE;
        }
        PyObject *role = get(m, k_role);
        int assistant = role == NULL ? 0 : equals_str(role, s_assistant);
        if (assistant == CANNOT) {
            Py_RETURN_NONE;
        }
        if (!assistant) {
            continue;
        }
        int valid = usage_tokens(m, &usage);
        if (valid == -2) {
            return NULL;
        }
        if (valid == CANNOT) {
            Py_RETURN_NONE;
        }
        if (valid) {
            break;
        }
    }
    long long trailing = 0;
    for (Py_ssize_t i = index + 1; i < n; i++) {
        Py_ssize_t chars = message_chars(PyList_GET_ITEM(messages, i));
        if (chars < 0) {
            Py_XDECREF(usage);
            Py_RETURN_NONE;
        }
        trailing += (chars + 3) / 4;
    }
    if (usage == NULL) {
        return Py_BuildValue("(LiLO)", trailing, 0, trailing, Py_None);
    }
    long long u = PyLong_AsLongLong(usage);
    PyObject *result = Py_BuildValue("(LOLn)", u + trailing, usage, trailing, index);
    Py_DECREF(usage);
    return result;
}

static PyMethodDef methods[] = {
    {"chars", chars, METH_O,
     "chars($module, message, /)\n--\n\n"
     "estimate_chars(message) for plain JSON data, or -1 where the Python port must decide."},
    {"tokens", tokens, METH_O,
     "tokens($module, message, /)\n--\n\n"
     "estimate_tokens(message) for plain JSON data, or -1 where the Python port must decide."},
    {"stringify_length", stringify_length, METH_O,
     "stringify_length($module, value, /)\n--\n\n"
     "JSON.stringify(value).length for plain JSON data, or -1 where the Python port must decide."},
    {"message_entries_checked", (PyCFunction)(void (*)(void))message_entries_checked, METH_FASTCALL,
     "message_entries_checked($module, entries, start, end, /)\n--\n\n"
     "Whether every entry of entries[start:end] has a type and every message entry a dict message;\n"
     "None where the Python check must decide (not a list of dicts, a type that is not a string)."},
    {"tokens_back", (PyCFunction)(void (*)(void))tokens_back, METH_FASTCALL,
     "tokens_back($module, entries, start, end, keep, total, /)\n--\n\n"
     "find_cut_point's walk back over plain message entries (a dict message with content):\n"
     "(index, total, hit), or None."},
    {"parts_tokens_back", (PyCFunction)(void (*)(void))parts_tokens_back, METH_FASTCALL,
     "parts_tokens_back($module, per_entry, start, end, keep, total, /)\n--\n\n"
     "cut_point_parts' walk back over per-entry message lists: (index, total, hit), or None."},
    {"project_plain", (PyCFunction)(void (*)(void))project_plain, METH_FASTCALL,
     "project_plain($module, context_entries, types, to_msgs, with_lists, /)\n--\n\n"
     "project_parts without context edits: (per-entry message lists or None, messages), or None."},
    {"add_file_ops", (PyCFunction)(void (*)(void))add_file_ops, METH_FASTCALL,
     "add_file_ops($module, messages, read, written, edited, /)\n--\n\n"
     "The paths of read, write and edit tool calls added to the three sets: True, or None (sets untouched)."},
    {"select_context", (PyCFunction)(void (*)(void))select_context, METH_FASTCALL,
     "select_context($module, path, types, /)\n--\n\n"
     "context_entries_and_types on a walked path with a compaction: (entries, types), or None."},
    {"project_edited", (PyCFunction)(void (*)(void))project_edited, METH_FASTCALL,
     "project_edited($module, context_entries, types, project_entry, with_lists, /)\n--\n\n"
     "project_parts with context edits: (per-entry message lists or None, messages), or None."},
    {"run_path", (PyCFunction)(void (*)(void))run_path, METH_FASTCALL,
     "run_path($module, entries, run_start, positions, types, at, /)\n--\n\n"
     "_run_path's walk over the session's runs from position at: (path, types), or None."},
    {"context_settings", (PyCFunction)(void (*)(void))context_settings, METH_FASTCALL,
     "context_settings($module, path, types, /)\n--\n\n"
     "context_settings_of on a path whose messages are checked: (thinking level, model), or None."},
    {"context_tokens", context_tokens, METH_O,
     "context_tokens($module, messages, /)\n--\n\n"
     "estimate_context_tokens without a cache: (tokens, usage tokens, trailing tokens, usage index), or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "compiled",
    "Compiled fast paths of Pi's token estimate, cut-point walks and projection; the Python port is the reference.", -1,
    methods,
};

#define INTERN(var, text)                                                                          \
    if ((var = PyUnicode_InternFromString(text)) == NULL) {                                        \
        return NULL;                                                                               \
    }

PyMODINIT_FUNC
PyInit_compiled(void)
{
    init_escape_extra();
    INTERN(k_role, "role");
    INTERN(k_content, "content");
    INTERN(k_type, "type");
    INTERN(k_text, "text");
    INTERN(k_thinking, "thinking");
    INTERN(k_arguments, "arguments");
    INTERN(k_name, "name");
    INTERN(k_command, "command");
    INTERN(k_output, "output");
    INTERN(k_summary, "summary");
    INTERN(k_message, "message");
    INTERN(k_sections, "sections");
    INTERN(k_toolsAdded, "toolsAdded");
    INTERN(k_path, "path");
    INTERN(k_id, "id");
    INTERN(k_firstKeptEntryId, "firstKeptEntryId");
    INTERN(k_targetId, "targetId");
    INTERN(k_parentId, "parentId");
    INTERN(k_thinkingLevel, "thinkingLevel");
    INTERN(k_provider, "provider");
    INTERN(k_model, "model");
    INTERN(k_modelId, "modelId");
    INTERN(k_usage, "usage");
    INTERN(k_stopReason, "stopReason");
    INTERN(k_totalTokens, "totalTokens");
    INTERN(k_input, "input");
    INTERN(k_cacheRead, "cacheRead");
    INTERN(k_cacheWrite, "cacheWrite");
    INTERN(s_read, "read");
    INTERN(s_edit, "edit");
    INTERN(s_write, "write");
    INTERN(s_assistant, "assistant");
    INTERN(s_user, "user");
    INTERN(s_toolResult, "toolResult");
    INTERN(s_custom, "custom");
    INTERN(s_bashExecution, "bashExecution");
    INTERN(s_branchSummary, "branchSummary");
    INTERN(s_compactionSummary, "compactionSummary");
    INTERN(s_system, "system");
    INTERN(s_text, "text");
    INTERN(s_thinking, "thinking");
    INTERN(s_toolCall, "toolCall");
    INTERN(s_image, "image");
    INTERN(s_message, "message");
    INTERN(s_compaction, "compaction");
    INTERN(s_custom_message, "custom_message");
    INTERN(s_branch_summary, "branch_summary");
    INTERN(s_context_edit, "context_edit");
    INTERN(s_thinking_level_change, "thinking_level_change");
    INTERN(s_model_change, "model_change");
    INTERN(s_off, "off");
    INTERN(s_aborted, "aborted");
    INTERN(s_error, "error");
    return PyModule_Create(&module);
}

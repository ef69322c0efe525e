/*
 * acm_write(): the one variadic function of the provider interface (acm_prov.h).
 * Rust cannot define a C variadic function on stable, so this formats the arguments
 * and hands the finished line to the Rust side (core_api.rs). Lines longer than the
 * buffer are cut, as a log line should never allocate or fail.
 */
#include <stdarg.h>
#include <stdio.h>

int acm_core_log_level(void);
void acm_core_write(int level, const char *text);

__attribute__((visibility("default")))
void acm_write(int level, const char *format, ...)
{
	char line[1024];
	va_list args;

	if (!format || level > acm_core_log_level())
		return;
	va_start(args, format);
	vsnprintf(line, sizeof line, format, args);
	va_end(args);
	acm_core_write(level, line);
}
